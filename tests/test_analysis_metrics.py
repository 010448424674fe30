"""Metrics on small hand-built runs."""

from __future__ import annotations

import json

import analysis_fixtures as F
import numpy as np
import pandas as pd
import pytest
from analysis_fixtures import PID, TID, RunBuilder

from diag.analysis.catalog import UNITS
from diag.analysis.latency import queue_wait_ns
from diag.analysis.metrics import BY_NAME, CATALOG, compute_metrics


def test_catalog_is_complete_and_units_known(tmp_path):
    assert len(BY_NAME) == len(CATALOG)
    for m in CATALOG:
        assert m.unit in UNITS, m
        assert m.doc.endswith(".") and len(m.doc) < 200, m
    metrics = compute_metrics(F.gpu_compute(str(tmp_path)))
    assert set(metrics) == set(BY_NAME)


def test_inside_model_share_and_outside_busy(tmp_path):
    m = compute_metrics(F.gpu_cpu_bound(str(tmp_path)))
    assert m["steady.inside_model_share"] == pytest.approx(0.2, abs=0.02)
    assert m["steady.step_thread_cpu"] == pytest.approx(0.97, abs=0.02)
    # CPU not explained by model time is outside work
    assert m["steady.outside_busy_share"] == pytest.approx(0.77, abs=0.03)
    assert m["steady.gpu_busy"] == pytest.approx(0.18)


def test_copy_share_and_pageable(tmp_path):
    m = compute_metrics(F.gpu_transfer(str(tmp_path)))
    assert m["steady.copy_share"] == pytest.approx(0.6, abs=0.03)
    assert m["steady.copy_pageable_fraction"] == 1.0
    assert m["steady.copy_bytes_per_step"] == pytest.approx(60e6, rel=0.01)


def test_blocking_copy_that_waits_for_the_gpu_is_not_copy_time(tmp_path):
    # a .cpu() of 4 KB that blocks 8 ms waiting for queued kernels is a wait, not a transfer
    b = RunBuilder(str(tmp_path), gpu=True)
    steps = b.steps(4.5, 0.010, 0.001, 2500)
    for _, end in steps:
        b.copy(end, 0.008, 4096, direction="d2h")
    b.thread_cpu(0.95)
    m = compute_metrics(b.write())
    assert m["steady.copy_share"] < 0.01


def test_syncs_per_step(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=True)
    steps = b.steps(4.5, 0.010, 0.004, 2000, syncs=2)
    for _, end in steps:
        b.sync(end + 0.001, 0.003)
    m = compute_metrics(b.write())
    assert m["steady.syncs_in_step_per_step"] == pytest.approx(2.0)
    assert m["steady.syncs_per_step"] == pytest.approx(3.0)
    assert m["steady.sync_share"] == pytest.approx(0.3, abs=0.02)


def test_step_latency_percentiles_skip_profiled_steps(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    b.steps(4.5, 0.02, [0.010] * 1000, 1000, in_window={500, 501, 502})
    # profiled steps are slow; they must not move the percentiles
    for row in b.rows["steps"]:
        if row["in_window"]:
            row["dur_ns"] = int(0.019 * 1e9)
    m = compute_metrics(b.write())
    assert m["steady.step_p99_ms"] == pytest.approx(10.0)
    assert m["steady.steps_per_s"] == pytest.approx(50, rel=0.02)
    assert m["steady.samples_per_s"] == pytest.approx(400, rel=0.02)
    assert m["steady.batch_p50"] == 8 and m["steady.input_rank"] == 4


def test_queue_wait_same_thread_and_worker_thread():
    ms = 1_000_000
    steps = pd.DataFrame({"ts_ns": [100 * ms, 200 * ms, 300 * ms], "dur_ns": 50 * ms, "pid": 1, "tid": 9})
    # handed to worker thread 9 from threads 1-3: served by the last step ending before completion
    req = pd.DataFrame({"ts_ns": 90 * ms, "dur_ns": [65 * ms, 165 * ms, 265 * ms], "pid": 1, "tid": [1, 2, 3]})
    assert (queue_wait_ns(req, steps) / ms).tolist() == [10, 110, 210]
    # a thread that serves its own requests one at a time: its first step inside the request
    req2 = pd.DataFrame({"ts_ns": [180 * ms], "dur_ns": [200 * ms], "pid": 1, "tid": [9]})
    assert (queue_wait_ns(req2, steps) / ms).tolist() == [20]
    # no step of the process inside the request: unknown
    req3 = pd.DataFrame({"ts_ns": [1000 * ms], "dur_ns": [10 * ms], "pid": 1, "tid": [9]})
    assert np.isnan(queue_wait_ns(req3, steps)[0])


def test_queue_metrics_batch1_worker(tmp_path):
    m = compute_metrics(F.queueing_batch1(str(tmp_path)))
    assert m["steady.queue_wait_p50_ms"] == pytest.approx(14.0, abs=0.5)
    assert m["steady.service_p50_ms"] == pytest.approx(10.2, abs=0.3)
    assert m["steady.queue_wait_ratio"] > 1.2
    assert m["steady.queue_behind_model_share"] > 0.6
    assert m["steady.request_concurrency"] > 2


def test_gpu_metrics(tmp_path):
    m = compute_metrics(F.gpu_memory(str(tmp_path)))
    assert m["steady.gpu_util"] == pytest.approx(0.95)
    assert m["steady.dram_bw_util"] == pytest.approx(0.85)
    assert m["steady.math_active"] == pytest.approx(0.12)
    assert m["steady.gpu_mem_used_ratio"] == pytest.approx(20 / 141, rel=0.01)
    assert m["steady.throttle_share"] == 0.0


def test_throttle_reasons(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=True)
    b.steps(4.5, 0.01, 0.009, 2000)
    b.gpu_samples(90, throttle=0x004 | 0x001, sm_clock=1500)
    m = compute_metrics(b.write())
    assert m["steady.power_throttle_share"] == 1.0 and m["steady.thermal_throttle_share"] == 0.0
    assert m["steady.sm_clock_ratio"] == pytest.approx(1500 / 1980)


def test_kernel_window_metrics(tmp_path):
    m = compute_metrics(F.gpu_launch(str(tmp_path)))
    assert m["steady.kernel_mean_us"] == pytest.approx(4.0, abs=0.1)
    assert m["steady.kernels_per_step"] == pytest.approx(120)
    assert m["steady.kernel_gap_mean_us"] == pytest.approx(12.0, abs=0.5)
    assert m["steady.kernel_idle_share"] > 0.5
    assert m["steady.kernel_elementwise_share"] == 1.0


def test_io_wait_from_socket_stacks_without_disk_bytes(tmp_path):
    m = compute_metrics(F.io_socket(str(tmp_path)))
    assert m["steady.io_wait_share"] == pytest.approx(0.7, abs=0.05)
    assert m["steady.disk_read_bps"] == 0.0


def test_host_rates(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    b.steps(4.5, 0.02, 0.01, 1000)
    b.host(250, read_bps=5e6, read_chars_bps=8e6, iowait=0.3)
    b.host(150, pid=PID + 1, ppid=PID)
    m = compute_metrics(b.write())
    assert m["steady.process_cpu_cores"] == pytest.approx(4.0)
    assert m["steady.process_cpu_share"] == pytest.approx(4.0 / 16)
    assert m["steady.worker_cpu_cores"] == pytest.approx(1.5)
    assert m["steady.disk_read_bps"] == pytest.approx(5e6, rel=0.01)
    assert m["steady.read_chars_bps"] == pytest.approx(8e6, rel=0.01)
    assert m["steady.iowait_share"] == pytest.approx(0.3, rel=0.01)


def test_startup_parts_and_excess(tmp_path):
    m = compute_metrics(F.cold_start(str(tmp_path)))
    assert m["startup.duration_s"] == pytest.approx(25.0, abs=0.01)
    assert m["startup.import_s"] == pytest.approx(2.5)
    assert m["startup.model_load_s"] == pytest.approx(20.0)
    assert m["startup.first_step_s"] == pytest.approx(1.5)
    assert m["startup.baseline_s"] == 4.0
    assert m["startup.excess_s"] == pytest.approx(21.0, abs=0.01)
    assert m["coldstart.share"] == pytest.approx(21.0 / (40 - 4.0), abs=0.01)  # the baseline counts for no label


def test_gc_metrics(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    steps = b.steps(4.5, 0.05, [0.005] * 2000, 2000)
    for i in range(0, 2000, 100):  # a 30 ms pause inside every 100th step
        s, _ = steps[i]
        b.event("gc", s + 0.001, 0.030, detail={"generation": 2})
        b.rows["steps"][i]["dur_ns"] = int(0.036e9)
    m = compute_metrics(b.write())
    assert m["steady.gc_tail_overlap"] == 1.0
    assert m["steady.gc_pause_max_ms"] == pytest.approx(30.0)
    assert m["steady.gc_share"] == pytest.approx(19 * 0.03 / (m["steady.duration_s"]), rel=0.1)


def test_ort_provider_fallback(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    b.steps(4.5, 0.02, 0.01, 100)
    b.event("ort_session", 3.0, 0.5, detail={"requested": ["CUDAExecutionProvider", "CPUExecutionProvider"],
                                              "got": ["CPUExecutionProvider"]})
    b.event("ort_session", 3.5, 0.5, detail={"requested": ["CPUExecutionProvider"], "got": ["CPUExecutionProvider"]})
    m = compute_metrics(b.write())
    assert m["ort.provider_fallback"] == 1.0 and m["ort.sessions"] == 2.0


def test_empty_run_gives_nones_not_errors(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    m = compute_metrics(b.write())
    assert m["steady.inside_model_share"] is None and m["steady.gpu_busy"] is None
    json.dumps(m, allow_nan=False)


def test_metrics_from_raw_jsonl_partial_run(tmp_path):
    # a killed run: no Parquet, only raw JSON lines; analysis must still work
    run = F.cpu_compute(str(tmp_path))
    import os

    from diag.store.jsonl import JsonlWriter
    steps = run.table("steps")
    os.remove(os.path.join(run.path, "steps.parquet"))
    w = JsonlWriter(run.path, "steps")
    for row in steps.to_dict("records"):
        w.write({k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()})
    w.close()
    from diag.store.run import open_run
    m = compute_metrics(open_run(run.path))
    assert m["steady.inside_model_share"] == pytest.approx(0.95, abs=0.02)


def test_docs_metrics_md_is_in_sync():
    import pathlib

    from diag.analysis.docs import metrics_markdown
    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "metrics.md"
    assert path.read_text() == metrics_markdown(), "regenerate: python -m diag.analysis.docs"


_ = TID


def test_stack_thread_found_when_pyspy_ids_are_not_native(tmp_path):
    """py-spy reported pthread ids: the stepping thread is the one with model calls on its stack."""
    b = RunBuilder(str(tmp_path), gpu=False)
    period = 0.020
    steps = F._loop(b, period, 0.25)
    model = "main (app.py:20);Module._call_impl (/x/torch/nn/modules/module.py:1750);forward (net.py:5)"
    b.stacks([(s, e - s, model, False) for s, e in steps], tid=139877792451456)
    b.stacks([(e, period * 0.7, F.SOCKET_READ, True) for _, e in steps]
             + [(e + period * 0.7, period * 0.05, F.SOCKET_PREP, False) for _, e in steps], tid=139877792451456)
    b.stacks([(4.5, 25.0, "run (threading.py:1);serve (store.py:3)", False)], tid=139877779207872)
    b.thread_cpu(0.3)
    m = compute_metrics(b.write())
    assert m["steady.io_wait_share"] == pytest.approx(0.7, abs=0.05)
    assert m["steady.helper_threads_busy"] == pytest.approx(1.0, abs=0.05)


def test_sampled_tables_are_weighted(tmp_path):
    """After table_rows rows the recorder keeps 1 step in 4 with weight 4: shares and counts must not shrink."""
    full = compute_metrics(F.gpu_cpu_bound(str(tmp_path / "full")))
    b = RunBuilder(str(tmp_path / "sampled"), gpu=True)
    F._loop(b, 0.010, 0.2)
    b.thread_cpu(0.97)
    b.gpu_samples(18, from_s=F.STARTUP_S)
    kept = []
    for i, row in enumerate(b.rows["steps"]):
        if i < 500:
            kept.append({**row, "weight": 1})
        elif i % 4 == 0:
            kept.append({**row, "weight": 4})
    b.rows["steps"] = kept
    m = compute_metrics(b.write())
    for name in ("steady.inside_model_share", "steady.steps_per_s", "steady.samples_per_s",
                 "steady.outside_busy_share"):
        assert m[name] == pytest.approx(full[name], rel=0.03), name
    assert m["steady.step_p50_ms"] == pytest.approx(full["steady.step_p50_ms"])


def test_queue_wait_ignores_requests_whose_step_may_have_been_dropped():
    ms = 1_000_000
    # worker steps every 10 ms; only 1 in 2 kept (weight 2) after the first four
    ts = [i * 10 * ms for i in range(10)]
    steps = pd.DataFrame({"ts_ns": ts, "dur_ns": 9 * ms, "pid": 1, "tid": 9, "weight": [1] * 4 + [2] * 6})
    steps = steps[(steps.index < 4) | (steps.index % 2 == 0)]
    req = pd.DataFrame({"ts_ns": [5 * ms, 65 * ms], "dur_ns": [25 * ms, 25 * ms], "pid": 1, "tid": [1, 1]})
    wait = queue_wait_ns(req, steps)
    assert wait[0] / ms == pytest.approx(15)  # served by the step at 20 ms, in the dense part
    assert np.isnan(wait[1])  # its step (at 70 ms) was dropped: unknown, not 'waited 15 ms more'
