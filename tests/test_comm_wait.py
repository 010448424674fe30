"""Waiting for peers told apart from transfer in collective kernels (issue 17), on synthetic rows."""

from __future__ import annotations

import pandas as pd

from diag.analysis.communication import comm_stats, transfer_floor
from diag.store.kineto import message_bytes

US = 1000


def _rows(rows: list[tuple[int, int, str, float | None]]) -> pd.DataFrame:
    """(start us, duration us, category, message bytes) -> kernel rows."""
    return pd.DataFrame([{"ts_ns": a * US, "dur_ns": d * US, "kind": "kernel", "category": c,
                          "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" if c == "communication" else "gemm",
                          "bytes": b} for a, d, c, b in rows])


def test_time_beyond_the_fastest_same_collective_is_waiting() -> None:
    # a 16 KB all-reduce takes 6 us when both ranks are there; once it waits 294 us for the peer
    k = _rows([(0, 100, "gemm", None), (100, 300, "communication", 16384.0),
               (400, 100, "gemm", None), (500, 6, "communication", 16384.0)])
    k = k.assign(floor_ns=transfer_floor(k))
    s = comm_stats(k, 0, 506 * US)
    assert s.comm_ns == 306 * US
    assert s.wait_ns == 294 * US
    assert s.exposed_ns == 306 * US and s.exposed_transfer_ns == 12 * US


def test_sizes_keep_collectives_apart_and_unknown_sizes_count_whole() -> None:
    # a large message is slower, not waiting; a kernel of unknown size is all transfer
    k = _rows([(0, 6, "communication", 16384.0), (10, 40, "communication", 8388608.0),
               (60, 300, "communication", None), (400, 5, "communication", None)])
    assert transfer_floor(k).tolist() == [6 * US, 40 * US, 300 * US, 5 * US]


def test_transfer_under_compute_is_not_exposed() -> None:
    k = _rows([(0, 100, "gemm", None), (50, 100, "communication", 1024.0), (200, 10, "communication", 1024.0)])
    k = k.assign(floor_ns=transfer_floor(k))
    s = comm_stats(k, 0, 210 * US)
    # first all-reduce: 90 us wait (50 of it under the gemm) then 10 us transfer, not under compute
    assert s.wait_ns == 90 * US
    assert s.exposed_ns == 60 * US and s.exposed_transfer_ns == 20 * US


def test_message_bytes_from_kineto_args() -> None:
    assert message_bytes({"In msg nelems": 25136, "Out msg nelems": 201088, "dtype": "BFloat16"}) == 201088 * 2
    assert message_bytes({"In msg nelems": 10, "Out msg nelems": 10, "dtype": "Float"}) == 40
    assert message_bytes({"grid": [1, 1, 1]}) is None
    assert message_bytes({"In msg nelems": 10, "dtype": "mystery"}) is None


def test_peers_bound_the_transfer_without_sizes() -> None:
    # two ranks, one all-reduce of unknown size per window: rank 0 waited, rank 1 arrived last
    rows = []
    for pid, dur in ((1, 300), (2, 6)):
        for w in (0, 1):
            rows.append({"ts_ns": (w * 1000 + 100) * US, "dur_ns": dur * US, "kind": "kernel", "window": w,
                         "category": "communication", "name": "ncclDevKernel_AllReduce", "bytes": None, "pid": pid})
            rows.append({"ts_ns": (w * 1000) * US, "dur_ns": 50 * US, "kind": "kernel", "window": w,
                         "category": "gemm", "name": "gemm", "bytes": None, "pid": pid})
    k = pd.DataFrame(rows)
    floor = transfer_floor(k)
    comm = (k["category"] == "communication").to_numpy()
    assert floor[comm].tolist() == [6 * US] * 4
    assert floor[~comm].tolist() == [50 * US] * 4
    # ranks whose windows hold different collectives are not paired
    odd = pd.concat([k, k.iloc[[0]].assign(name="ncclDevKernel_Broadcast", ts_ns=900 * US)], ignore_index=True)
    assert transfer_floor(odd)[0] == 300 * US


def test_recorded_compute_job_without_collective_sizes() -> None:
    """The h200x2_compute run with diag's collective hooks' rows removed: peers alone tell the wait."""
    from pathlib import Path

    from diag.engine import diagnose
    from diag.store.run import open_run

    run = open_run(str(Path(__file__).parent / "data" / "multi_gpu" / "h200x2_compute"))
    table = run.table

    def without_comm_rows(name: str) -> pd.DataFrame:
        t = table(name)
        return t[t["kind"] != "comm"] if name == "events" else t

    run.table = without_comm_rows  # type: ignore[method-assign]
    d = diagnose(run)
    assert d.metrics["steady.comm_sized_fraction"] == 0
    assert d.metrics["steady.comm_wait_fraction"] > 0.9
    assert d.primary == "compute_bound" and d.margin >= 0.2
