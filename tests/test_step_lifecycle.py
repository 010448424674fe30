"""The recorder's step lifecycle (begin_step/end_step), driven by a fake third framework, and the one step layout."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from diag.collect.recorder import Recorder, _step_line
from diag.store.run import open_run
from diag.store.steps import DUR, STEP_COLUMNS, STEP_LAYOUT, TABLE_COLUMNS

REPO = Path(__file__).resolve().parents[1]


class Graph:
    """A stand-in for the next framework (say, CUDA-graph replays): replay() may nest and may raise."""

    def __init__(self, batch: int, inner: Graph | None = None, fail: bool = False) -> None:
        self.batch, self.inner, self.fail = batch, inner, fail

    def replay(self) -> str:
        if self.inner is not None:
            self.inner.replay()
        if self.fail:
            raise RuntimeError("replay failed")
        return "done"


def _describe(graph: Graph, args: tuple, kwargs: dict | None) -> tuple[str, int, list[Any], str, str]:
    if graph.batch < 0:
        raise ValueError("cannot describe")
    return "Graph", graph.batch, [(graph.batch, 4)], "float16", "cuda:0"


def _hook(rec: Recorder) -> Any:
    """Patch Graph.replay the way a hooks module would, using only the recorder's lifecycle."""
    orig = Graph.replay

    def replay(self: Graph) -> str:
        row = rec.begin_step("cuda_graph", _describe, self)
        try:
            if self.batch == 3:
                rec.sync("Graph.synchronize", 0, 1)  # a synchronizing call made inside the step
            return orig(self)
        finally:
            rec.end_step(row)

    Graph.replay = replay  # type: ignore[method-assign]
    return orig


@pytest.fixture
def recorded(tmp_path: Path, request: Any) -> Any:
    (tmp_path / "run.json").write_text(json.dumps({"schema": "diag.run/1", "start_ns": 0}))
    rec = Recorder(str(tmp_path), {"gc": False, "table_rows": getattr(request, "param", 1000)})
    ended: list[int] = []
    rec.on_step_end.append(ended.append)
    orig = _hook(rec)
    yield rec, ended
    Graph.replay = orig  # type: ignore[method-assign]


def _tables(rec: Recorder) -> tuple[Any, Any]:
    rec.flush()
    run = open_run(rec.run_dir)
    return run.table("steps"), run.table("events")


def test_fake_framework_steps(recorded: Any) -> None:
    rec, ended = recorded
    Graph(2).replay()
    Graph(5, inner=Graph(7, inner=Graph(9))).replay()  # nested replays: one step, the outermost
    rec.in_window = True
    Graph(3).replay()
    rec.in_window = False
    with pytest.raises(RuntimeError):
        Graph(4, fail=True).replay()  # a step that raised is still a step, and the error goes on
    Graph(-1).replay()  # describe failed: the step is kept, undescribed
    steps, events = _tables(rec)

    assert list(steps.columns[:len(TABLE_COLUMNS)]) == list(TABLE_COLUMNS)
    assert list(steps["seq"]) == [0, 1, 2, 3, 4] and ended == [0, 1, 2, 3, 4]
    assert list(steps["batch"]) == [2, 5, 3, 4, -1]
    assert list(steps["model"]) == ["Graph"] * 4 + [""]
    assert set(steps["source"]) == {"cuda_graph"}
    assert steps["shapes"].iloc[0] == "[[2,4]]" and steps["device"].iloc[0] == "cuda:0"
    assert list(steps["in_window"]) == [False, False, True, False, False]
    assert list(steps["syncs"]) == [0, 0, 1, 0, 0]
    assert (steps["gpu_ns"] == -1).all() and (steps["weight"] == 1).all() and (steps["dur_ns"] > 0).all()
    assert rec.state.depth == 0

    first = events[events["kind"] == "first_step"]
    assert len(first) == 1 and first["name"].iloc[0] == "Graph"
    assert json.loads(first["detail"].iloc[0]) == {"source": "cuda_graph"}
    assert int(first["ts_ns"].iloc[0]) == int(steps["ts_ns"].iloc[0])
    assert int(first["dur_ns"].iloc[0]) == int(steps["dur_ns"].iloc[0])


@pytest.mark.parametrize("recorded", [2], indirect=True)
def test_sampled_out_steps_are_numbered_and_called_back(recorded: Any) -> None:
    rec, ended = recorded
    for batch in range(12):
        Graph(batch).replay()
    steps, events = _tables(rec)
    # 2 rows kept in full, then 1 in 2, then 1 in 4: seq shows the gaps, weight what a row stands for
    assert list(steps["seq"]) == [0, 1, 2, 4, 8]
    assert list(steps["weight"]) == [1, 1, 2, 2, 4]
    assert ended == list(range(12))  # sampled-out steps still reach the callbacks (kernel windows)
    assert (events["kind"] == "first_step").sum() == 1


def test_deferred_rows_are_written_by_their_owner(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path), {"gc": False})
    held: list[Any] = []
    row = rec.begin_step("torch", lambda mod, args, kwargs: ("M", 1, [], "", "cuda:0"))
    time.sleep(0.05)  # the hook's own set-up (recording a CUDA event): not the step's time
    rec.restart_clock(row)
    rec.end_step(row, lambda r, extra: held.append((r, extra)), "events")
    assert len(held) == 1 and held[0][1] == "events" and not rec._pending["steps"]
    assert 0 < held[0][0][DUR] < 40_000_000
    assert rec.end_step(None) is None  # a nested call's token: nothing to do


def test_step_line_matches_layout() -> None:
    row = [1, 2, 3, "torch", 'M"x', 8, [(8, 4)], "float32", "cpu", -1, 0, 7, True, 1]
    assert len(row) == len(STEP_COLUMNS)
    fast = json.loads(_step_line(row, 99))
    assert list(fast) == list(TABLE_COLUMNS)
    assert fast["model"] == 'M"x' and fast["shapes"] == "[[8,4]]" and fast["in_window"] is True
    odd = list(row)
    odd[5] = None  # not an int: the general encoder writes the same columns
    slow = json.loads(_step_line(odd, 99))
    assert list(slow) == list(TABLE_COLUMNS) and slow["batch"] is None


def test_run_format_documents_every_step_column() -> None:
    text = (REPO / "docs" / "run-format.md").read_text()
    section = text.split("### steps", 1)[1].split("\n### ", 1)[0]
    documented: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and "`" in cells[0]:
            for name in re.findall(r"`([a-z_]+)`", cells[0]):
                documented[name] = cells[1]
    types = {name: "str" if kind == "shapes" else kind for name, kind in STEP_LAYOUT}
    assert documented == {**types, "pid": "int"}


def test_a_frequent_kind_of_row_samples_sooner_with_exact_totals(tmp_path) -> None:
    """weight(table, full): collectives come several per step, so they keep fewer rows whole."""
    rec = Recorder(str(tmp_path), {"gc": False, "table_rows": 50_000})
    weights = [rec.weight("comm", 200) for _ in range(20_000)]
    assert weights[:200] == [1] * 200 and weights[200:400].count(0) > 0
    kept = [w for w in weights if w]
    assert len(kept) < 2_000
    assert abs(sum(kept) - 20_000) / 20_000 < 0.05  # weights stand for the rows left out
    assert rec.weight("steps") == 1  # other tables keep table_rows whole


def test_a_fast_loop_keeps_a_capped_rate_of_step_rows_with_exact_totals(tmp_path: Path, monkeypatch: Any) -> None:
    """Past detail_rows, steps are kept at most ~rows_per_s a second (1 in k, weight k); window steps all."""
    from diag.collect import recorder as recorder_mod

    # The recorder's clock moves 1 µs a call, so the loop's rate (and k) are the same on any machine.
    monkeypatch.setattr(recorder_mod, "_perf_ns", itertools.count(0, 1_000).__next__)
    (tmp_path / "run.json").write_text(json.dumps({"schema": "diag.run/1", "start_ns": 0}))
    rec = Recorder(str(tmp_path), {"gc": False, "detail_rows": 100, "rows_per_s": 1000})
    orig = _hook(rec)
    try:
        for i in range(20_000):  # a replay takes a few µs: far above 1000 steps a second
            rec.in_window = 15_000 <= i < 15_005
            Graph(1).replay()
    finally:
        Graph.replay = orig  # type: ignore[method-assign]
    steps, _ = _tables(rec)
    assert list(steps["seq"][:100]) == list(range(100)) and (steps["weight"][:100] == 1).all()
    assert len(steps) < 5_000  # 1 in k with k >= 4 once the rate is known
    window = steps[steps["in_window"].astype(bool)]
    assert list(window["seq"]) == list(range(15_000, 15_005)) and (window["weight"] == 1).all()
    outside = steps[~steps["in_window"].astype(bool)]
    assert abs(int(outside["weight"].sum()) - 19_995) / 20_000 < 0.01  # the weights stand for the rows left out
    assert (outside["seq"] % outside["weight"] == 0).all()


def test_a_slow_loop_keeps_every_step_row(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"schema": "diag.run/1", "start_ns": 0}))
    rec = Recorder(str(tmp_path), {"gc": False, "detail_rows": 10, "rows_per_s": 10**9})
    orig = _hook(rec)
    try:
        for _ in range(3_000):
            Graph(1).replay()
    finally:
        Graph.replay = orig  # type: ignore[method-assign]
    steps, _ = _tables(rec)
    assert len(steps) == 3_000 and (steps["weight"] == 1).all()


@pytest.mark.parametrize("ns_per_look", [10**6, 7 * 10**8, 2 * 10**9])  # rates far above, near and below the cap
def test_the_cached_one_in_k_is_the_level_scheme_and_the_rate_cap_at_every_row(tmp_path, monkeypatch,
                                                                            ns_per_look) -> None:
    """_capped_weight works k out only where it can change: the same weights as computing it at every row."""
    import diag.collect.recorder as R

    def direct(rec: Recorder, table: str, n: int, level_full: int) -> int:
        if n - rec._rate_look.get(table, R._NEVER_LOOKED)[0] >= R.RATE_ROWS:
            rec._retune_rate(table, n)
        k = rec._rate_every.get(table, 1)
        if n >= level_full:
            k = max(k, rec._sample_k(n, level_full))
        return k if n % k == 0 else 0

    for full in (7, 2000):
        got = []
        for fn in (Recorder._capped_weight, direct):
            clock = iter(range(0, 10**18, ns_per_look))  # one tick per look at the rate: the same in both
            monkeypatch.setattr(R, "_perf_ns", clock.__next__)
            rec = Recorder(str(tmp_path / f"{full}-{len(got)}"), {"gc": False, "rows_per_s": 1000})
            got.append([fn(rec, "steps", n, full) for n in range(400_000)])
        assert got[0] == got[1]


def test_gc_pauses_go_through_a_ring_allocated_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The collector's callback fills slots made at start (a container it grew moved the target's
    malloc heap); pauses a full ring has no slot for still count, in the next row's weight."""
    from diag.collect import recorder as recorder_mod
    from diag.store.jsonl import read_jsonl

    monkeypatch.setattr(recorder_mod, "GC_RING", 4)
    rec = Recorder(str(tmp_path))
    ring = rec._gc_ring
    for gen in (0, 1, 2, 0, 1, 2, 0):  # 7 collections, 4 slots
        rec._on_gc("start", {"generation": gen})
        rec._on_gc("stop", {"generation": gen, "collected": 3})
    assert rec._gc_ring is ring and len(ring) == 4
    rec.flush()
    rec._on_gc("start", {"generation": 1})
    rec._on_gc("stop", {"generation": 1, "collected": 0})
    rec.flush()
    rows = [e for e in read_jsonl(str(tmp_path / "raw" / f"events.{rec.pid}.jsonl")) if e["kind"] == "gc"]
    assert [r["name"] for r in rows] == ["gen0", "gen1", "gen2", "gen0", "gen1"]
    assert [r["weight"] for r in rows] == [4, 1, 1, 1, 1]  # 3 skipped: counted in the first kept row
    assert rec._gc_ring is ring and ring == [None] * 4
