"""torch.distributed hooks: collectives timed as `comm` events, the process's rank and group in meta."""

from __future__ import annotations

import os
import socket

import pytest
from hooks_support import details, run_target

from diag.collect.hooks.distributed import distributed_env, tensor_bytes

pytest.importorskip("torch")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_collectives_and_group_are_recorded(tmp_path) -> None:
    run, proc = run_target(tmp_path, f"""
        import os, torch, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="{_free_port()}", RANK="0", WORLD_SIZE="1",
                          LOCAL_RANK="0", TORCHELASTIC_RUN_ID="job7")
        dist.init_process_group("gloo")
        x = torch.ones(1000)
        net = torch.nn.Identity()
        for _ in range(3):
            dist.all_reduce(net(x))
        w = dist.all_reduce(x, async_op=True)
        w.wait()
        dist.broadcast(x, src=0)
        dist.all_gather_object([None], {{"a": 1}})
        dist.destroy_process_group()
        print("ok")
    """)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr
    ev = run.table("events")
    comm = ev[ev["kind"] == "comm"]
    names = comm["name"].tolist()
    # the blocking all_reduce's own internal wait is part of it; all_gather_object's inner collectives too
    assert names == ["all_reduce"] * 4 + ["wait", "broadcast", "all_gather_object"]
    d = details(ev, "comm")
    assert [x["bytes"] for x in d[:4]] == [4000] * 4
    assert [x["async_op"] for x in d[:4]] == [False, False, False, True]
    assert (comm["dur_ns"] > 0).all()
    meta = run.table("meta")
    assert "dist_backend" in meta.columns
    got = meta.dropna(subset=["dist_backend"]).iloc[0]
    assert (got["dist_backend"], got["dist_world_size"], got["dist_rank"]) == ("gloo", 1, 0)


def test_environment_of_a_rank() -> None:
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "MASTER_ADDR": "node0", "TORCHELASTIC_RUN_ID": "abc",
           "PATH": "/bin"}
    assert distributed_env(env) == {"rank": 3, "local_rank": 1, "world_size": 8, "master_addr": "node0",
                                    "elastic_run_id": "abc"}
    assert distributed_env({}) == {}


def test_tensor_bytes() -> None:
    import torch

    assert tensor_bytes((torch.ones(4, dtype=torch.bfloat16),), {}) == 8
    assert tensor_bytes(([torch.ones(2), torch.ones(2)], torch.ones(3)), {}) == 28
    assert tensor_bytes((None,), {"group": object()}) == 0


def test_collectives_are_sampled_outside_kernel_windows_and_kept_whole_inside(tmp_path) -> None:
    from diag.collect.hooks.distributed import DistributedHooks
    from diag.collect.recorder import Recorder
    from diag.store.jsonl import read_jsonl

    rec = Recorder(str(tmp_path), {"gc": False, "detail_rows": 10})
    hooks = DistributedHooks(rec, None)
    for i in range(200):
        rec.in_window = 100 <= i < 120  # a window of 20 collectives in the middle
        hooks.record("all_reduce", i, 5, (), {})
    rec.flush(final=True)
    rows = [r for r in read_jsonl(os.path.join(str(tmp_path), "raw", f"events.{os.getpid()}.jsonl"))
            if r["kind"] == "comm"]
    inside = [r for r in rows if 100 <= r["ts_ns"] < 120]
    assert len(inside) == 20 and all(r["weight"] == 1 for r in inside)
    assert len(rows) < 120 and sum(r["weight"] for r in rows) >= 200 - 8  # totals kept by weights
