"""View-facing series and tables (diag/analysis/series.py, tables.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from diag.analysis import series, tables
from diag.analysis.latency import PERCENTILES
from diag.analysis.metrics import compute_metrics
from diag.analysis.phases import Phase
from diag.store.manifest import write_manifest
from diag.store.run import open_run
from diag.synthetic import write_synthetic_run

T0 = 1_700_000_000 * 10**9
MS = 1_000_000


def _run(tmp_path: Path, **tables_rows: list[dict]) -> object:
    write_manifest(str(tmp_path), {"schema": "diag.run/1", "start_ns": T0, "end_ns": T0 + 10_000 * MS})
    for name, rows in tables_rows.items():
        pd.DataFrame([{"pid": 1, "tid": 1, **row} for row in rows]).to_parquet(tmp_path / f"{name}.parquet")
    return open_run(str(tmp_path))


def test_queue_wait_is_time_from_arrival_to_first_step(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        ranges=[{"ts_ns": T0, "dur_ns": 30 * MS, "name": "request", "kind": "request"},
                {"ts_ns": T0 + 100 * MS, "dur_ns": 10 * MS, "name": "request", "kind": "request"},
                {"ts_ns": T0 + 200 * MS, "dur_ns": 5 * MS, "name": "preprocess", "kind": "stage"}],
        steps=[{"ts_ns": T0 + 20 * MS, "dur_ns": 10 * MS}, {"ts_ns": T0 + 500 * MS, "dur_ns": 1 * MS}],
    )
    q = tables.queue_vs_service(run)
    assert q["queue_ms"].iloc[0] == pytest.approx(20.0)
    assert q["service_ms"].iloc[0] == pytest.approx(10.0)
    assert np.isnan(q["queue_ms"].iloc[1])  # no step inside the second request
    stages = tables.stage_summary(run)
    assert list(stages["name"]) == ["preprocess"] and stages["total_ms"].iloc[0] == pytest.approx(5.0)


def test_latency_summary_is_the_steady_weighted_unprofiled_one(tmp_path: Path) -> None:
    # A 400 ms first call (startup), then 1..10 ms steps; two of them profiled (1 s under CUPTI),
    # and one kept row standing for 3 calls. The table once took every row as it was (whole run,
    # profiled and first steps included, unweighted): now it is the metrics' computation.
    steps = [{"ts_ns": T0, "dur_ns": 400 * MS, "in_window": False, "weight": 1}]
    steps += [{"ts_ns": T0 + (500 + i * 20) * MS, "dur_ns": (i % 10 + 1) * MS, "in_window": False,
               "weight": 3 if i == 7 else 1} for i in range(100)]
    steps += [{"ts_ns": T0 + (2510 + i * 20) * MS, "dur_ns": 1000 * MS, "in_window": True, "weight": 1}
              for i in range(2)]
    steps.sort(key=lambda r: r["ts_ns"])
    run = _run(tmp_path, steps=steps)
    row = tables.latency_summary(run).set_index("kind").loc["step"]
    assert row["count"] == 102  # 100 rows, one of them standing for 3; no startup, no profiled step
    assert row["max_ms"] == 10.0
    assert row["p50_ms"] == 6.0 and row["p99_ms"] == 10.0  # weighted: 51st of 102 calls (unweighted: 5.5)
    metrics = compute_metrics(run)
    for p in PERCENTILES:
        assert row[f"p{p}_ms"] == metrics[f"steady.step_p{p}_ms"]
    assert row["mean_ms"] == pytest.approx(metrics["steady.step_mean_ms"])
    assert sorted(tables.latency_values(run, "step")) == sorted((i % 10 + 1) * 1.0 for i in range(100))
    assert tables.slowest(run, "step", 3)["latency_ms"].tolist() == [1000.0, 1000.0, 400.0]  # the whole run


def test_hot_frames_split_by_phase_and_model(tmp_path: Path) -> None:
    model = "main (app.py:1);_call_impl (torch/nn/modules/module.py:1762);forward (net.py:9)"
    prep = "main (app.py:1);prep (app.py:5)"
    run = _run(tmp_path, stacks=[
        {"ts_ns": T0 + 1000 * MS, "dur_ns": 300 * MS, "stack": model, "idle": False},
        {"ts_ns": T0 + 6000 * MS, "dur_ns": 900 * MS, "stack": prep, "idle": False},
        {"ts_ns": T0 + 7000 * MS, "dur_ns": 100 * MS, "stack": model, "idle": False},
        {"ts_ns": T0 + 8000 * MS, "dur_ns": 5000 * MS, "stack": "main (app.py:1);get (queue.py:1)", "idle": True},
    ])
    hot = tables.hot_frames(run, [Phase("startup", 0, 5), Phase("steady", 5, 100)])
    steady = hot[hot["phase"] == "steady"].set_index("frame")
    assert steady.loc["prep (app.py:5)", "share"] == pytest.approx(0.9)
    assert bool(steady.loc["forward (net.py:9)", "in_model"]) is True
    assert "get (queue.py:1)" not in steady.index  # idle samples are not hot
    tree = tables.stack_tree(run)
    root = tree[tree["parent"] == ""]
    assert root["value_s"].iloc[0] == pytest.approx(6.3)


def test_series_downsample_keeps_spikes_for_latency() -> None:
    t = np.arange(10_000, dtype=float)
    v = np.ones_like(t)
    v[5_000] = 100.0
    tt, vv = series.downsample(t, v, 100, how="max")
    assert len(tt) == 100 and vv.max() == 100.0
    tt, vv = series.downsample(t, v, 100, how="mean")
    assert vv.max() < 100.0


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory: pytest.TempPathFactory) -> object:
    return open_run(write_synthetic_run(str(tmp_path_factory.mktemp("syn")), 60, "gpu_compute"))


def test_timeline_has_every_group_and_bounded_points(gpu_run: object) -> None:
    got = series.timeline(gpu_run, max_points=500)
    assert {s.group for s in got} >= {"gpu", "gpm", "cpu", "memory", "copies", "latency"}
    assert all(len(s.t_s) <= 500 and len(s.t_s) == len(s.values) for s in got)
    assert all(np.all(np.diff(s.t_s) >= 0) for s in got)


def test_kernel_tables(gpu_run: object) -> None:
    top = tables.kernel_summary(gpu_run, 5)
    assert top["category"].iloc[0] == "gemm"
    assert top["share"].sum() <= 1.0 + 1e-9
    cats = tables.kernel_categories(gpu_run)
    assert cats["share"].sum() == pytest.approx(1.0)
    kinds = tables.memcpy_kinds(gpu_run)
    assert kinds.iloc[0][["copy_kind", "src_mem"]].tolist() == ["HtoD", "pageable"]
