"""The hooks' per-step fast paths keep the recorded data: tuple rows, cached graph descriptions, copy_ bail-out."""

from __future__ import annotations

import json
import os
import types

from diag.collect.recorder import Recorder, _range_line, _sync_line
from diag.store.jsonl import read_jsonl


def _rows(rec: Recorder, table: str) -> list[dict]:
    rec.flush()
    path = os.path.join(rec.run_dir, "raw", f"{table}.{os.getpid()}.jsonl")
    return read_jsonl(path) if os.path.exists(path) else []


def test_sync_and_range_lines_are_the_dict_rows() -> None:
    sync = (10, 20, 7, 'Tensor.item "q"', True, 2)
    assert json.loads(_sync_line(sync, 99)) == {"ts_ns": 10, "dur_ns": 20, "tid": 7, "api": 'Tensor.item "q"',
                                               "in_step": True, "weight": 2, "pid": 99}
    for name, kind in (("request", "request"), ("pré\nprocess", "stage")):
        row = json.loads(_range_line((1, 2, 3, name, "nvtx", "app", 1, 4, 5), 99))
        assert row == {"ts_ns": 1, "dur_ns": 2, "tid": 3, "name": name, "kind": kind, "source": "nvtx",
                       "domain": "app", "depth": 1, "weight": 4, "rid": 5, "pid": 99}
    # an odd value falls back to the general encoder instead of losing the row
    assert json.loads(_sync_line(("now", 2, 3, "x", False, 1), 9))["ts_ns"] == "now"


def test_sampled_sync_and_range_rows_keep_the_weights_of_every_table(tmp_path) -> None:
    rec = Recorder(str(tmp_path), {"gc": False, "table_rows": 10, "detail_rows": 10})
    reference = Recorder(str(tmp_path / "ref"), {"gc": False, "table_rows": 10})
    expected = [w for w in (reference.weight("x") for _ in range(1000)) if w]
    rec.state.depth = 1
    for i in range(1000):
        rec.sync("Tensor.item", i, 5)
        rec.range("preprocess", i, 3, source="nvtx", depth=0)
    rec.state.depth = 0
    syncs, ranges = _rows(rec, "syncs"), _rows(rec, "ranges")
    assert len(expected) < 200 and 1000 <= sum(expected) < 1000 + 128  # the sampling scheme (module doc)
    assert [r["weight"] for r in syncs] == expected and [r["weight"] for r in ranges] == expected
    assert all(r["in_step"] and r["api"] == "Tensor.item" and r["pid"] == os.getpid() for r in syncs)
    assert all(r["kind"] == "stage" and r["source"] == "nvtx" and r["rid"] == 0 for r in ranges)
    assert rec.state.syncs == 1000  # every sync counts for its step, kept or not


class Tensor:
    """A tensor on one device with an in-place copy that logs what really ran."""

    log: list[str] = []

    def __init__(self, device: int | None) -> None:
        self.device_index = device
        self.is_cuda = device is not None

    def get_device(self) -> int:
        return -1 if self.device_index is None else self.device_index

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        Tensor.log.append("copy_")
        return self

    def nelement(self) -> int:
        return 4

    def element_size(self) -> int:
        return 4

    def is_pinned(self) -> bool:
        return False

    to = cuda = cpu = copy_


def test_same_device_copy_is_no_row_and_cross_device_is(tmp_path, monkeypatch) -> None:
    from diag.collect.hooks import torch as torch_hooks

    rec = Recorder(str(tmp_path), {"gc": False})
    cls = type("Tensor", (Tensor,), {})
    hooks = torch_hooks.TorchHooks(rec, types.SimpleNamespace(Tensor=cls))
    hooks._install_copies()
    clock = []
    monkeypatch.setattr(torch_hooks, "_perf_ns", lambda: clock.append(1) or 0)
    Tensor.log = []
    cls(0).copy_(cls(0))            # CUDA -> same CUDA device (static graph inputs): passes straight through
    cls(None).copy_(cls(None))      # CPU -> CPU
    assert Tensor.log == ["copy_", "copy_"] and clock == [] and _rows(rec, "copies") == []
    cls(1).copy_(cls(0))            # between GPUs: a row
    cls(0).copy_(cls(None))         # host to device: a row
    rows = _rows(rec, "copies")
    assert [(r["api"], r["direction"]) for r in rows] == [("copy_", "d2d"), ("copy_", "h2d")]
    assert Tensor.log == ["copy_"] * 4


def test_graph_description_is_cached_and_refreshed_by_a_new_capture(tmp_path) -> None:
    from diag.collect.hooks.cuda_graph import GraphHooks

    calls = []

    class Cuda:
        def current_device(self) -> int:
            calls.append("current_device")
            return 1

    class Graph:
        pass

    rec = Recorder(str(tmp_path), {"gc": False})
    th = types.SimpleNamespace(_try=lambda what, fn: fn(), capture_graph=None)
    hooks = GraphHooks(rec, types.SimpleNamespace(cuda=Cuda()), th)
    g, h = Graph(), Graph()
    assert hooks.describe(g, (), {}) == ("CUDAGraph", -1, [], "", "cuda:1")   # nothing captured into it
    hooks._began(g)
    hooks.captured_step(g, _captured_row("Ranker", 1))
    hooks._ended(g)
    for _ in range(3):
        assert hooks.describe(g, (), {}) == ("Ranker", 1, [(1, 64)], "float32", "cuda:1")
    assert hooks.describe(h, (), {})[0] == "CUDAGraph"
    assert hooks.describe(g, (), {})[0] == "Ranker"                           # back to g: from the cache
    assert calls == ["current_device"] * 3                                    # once per description, not per replay
    hooks._began(g)                                                           # g captured again, another model
    hooks.captured_step(g, _captured_row("Reranker", 8))
    hooks._ended(g)
    assert hooks.describe(g, (), {})[:2] == ("Reranker", 8)


def _captured_row(model: str, batch: int) -> list:
    from diag.store.steps import BATCH, DTYPE, MODEL, SHAPES, STEP_COLUMNS, WEIGHT

    row = [0] * len(STEP_COLUMNS)
    row[MODEL], row[BATCH], row[SHAPES], row[DTYPE], row[WEIGHT] = model, batch, [(batch, 64)], "float32", 1
    return row


def test_syncs_are_sampled_after_detail_rows_steps_after_table_rows(tmp_path) -> None:
    # syncs come once a step or more: they are sampled sooner than steps (docs/performance.md)
    rec = Recorder(str(tmp_path), {"gc": False, "table_rows": 1000, "detail_rows": 10})
    for i in range(100):
        rec.sync("Tensor.item", i, 5)
        assert rec.weight("steps") == 1
    weights = [r["weight"] for r in _rows(rec, "syncs")]
    assert weights[:10] == [1] * 10 and weights[10] == 2 and sum(weights) >= 100 > len(weights)


def test_a_sampled_away_item_reads_no_clock_and_the_kept_ones_keep_their_weights(tmp_path, monkeypatch) -> None:
    from diag.collect.hooks import torch as torch_hooks

    rec = Recorder(str(tmp_path), {"gc": False, "detail_rows": 10})
    reference = Recorder(str(tmp_path / "ref"), {"gc": False, "detail_rows": 10})
    cls = type("Tensor", (Tensor,), {"item": lambda self: 1.5, "tolist": lambda self: [1.5]})
    fake = types.SimpleNamespace(Tensor=cls, cuda=types.SimpleNamespace(
        synchronize=lambda: None, Event=type("Event", (), {"synchronize": lambda self: None}),
        Stream=type("Stream", (), {"synchronize": lambda self: None})))
    torch_hooks.TorchHooks(rec, fake)._install_syncs()
    clock: list[int] = []
    monkeypatch.setattr(torch_hooks, "_perf_ns", lambda: clock.append(1) or len(clock))
    rec.state.depth = 1  # inside a step: every sync counts for it, kept or not
    assert [cls(0).item() for _ in range(1000)] == [1.5] * 1000
    rec.state.depth = 0
    expected = [w for w in (reference.frequent_weight("syncs") for _ in range(1000)) if w]
    rows = _rows(rec, "syncs")
    assert [r["weight"] for r in rows] == expected and len(rows) < 1000
    assert len(clock) == 2 * len(rows)  # two clock reads per kept sync, none for the others
    assert rec.state.syncs == 1000 and all(r["api"] == "Tensor.item" and r["in_step"] for r in rows)
    assert cls(None).item() == 1.5 and len(_rows(rec, "syncs")) == len(rows)  # a CPU tensor: no sync
