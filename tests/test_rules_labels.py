"""Each label on its evidence, and the known traps (issue 3, item 8)."""

from __future__ import annotations

import analysis_fixtures as F
import pytest
from analysis_fixtures import RunBuilder

from diag.engine import diagnose

CASES = [
    (F.gpu_compute, "compute_bound"),
    (F.gpu_memory, "memory_bound"),
    (F.gpu_transfer, "transfer_bound"),
    (F.gpu_launch, "launch_bound"),
    (F.gpu_cpu_bound, "cpu_bound"),
    (F.cpu_compute, "compute_bound"),
    (F.cpu_preprocess, "cpu_bound"),
    (F.io_socket, "io_bound"),
    (F.io_builtin_reads, "io_bound"),
    (F.gil_helper_thread, "cpu_bound"),
    (F.cold_start, "cold_start"),
    (F.queueing_batch1, "queueing"),
]


@pytest.mark.parametrize("make, label", CASES, ids=[c[0].__name__ for c in CASES])
def test_label(tmp_path, make, label):
    d = diagnose(make(str(tmp_path)))
    assert d.primary == label, d.scores
    assert d.scores[label] >= 0.5
    others = sorted((s for lb, s in d.scores.items() if lb != label), reverse=True)
    assert others[0] <= d.scores[label] - 0.2, d.scores


def test_trap_intra_op_threads_spinning_do_not_make_cpu_bound(tmp_path):
    """Process CPU 1500% from spinning OpenMP threads; the stepping thread mostly waits for input."""
    b = RunBuilder(str(tmp_path), gpu=False)
    period = 0.02
    steps = b.steps(4.5, period, 0.004, int(25 / period))
    b.stacks([(e, period * 0.75, F.SOCKET_READ, True) for _, e in steps])
    b.thread_cpu(0.22)
    b.host(1500)  # whole process: intra-op threads spin after each op
    for k in range(1, 14):
        b.thread_cpu(1.0, tid=F.TID + k)
    d = diagnose(b.write())
    assert d.metrics["steady.process_cpu_cores"] == pytest.approx(15)
    assert d.scores["cpu_bound"] == 0.0
    assert d.primary == "io_bound"


def test_trap_batch1_worker_busy_in_forward_is_queueing_when_requests_wait(tmp_path):
    d = diagnose(F.queueing_batch1(str(tmp_path)))
    assert d.metrics["steady.inside_model_share"] > 0.95  # looks compute-bound...
    assert d.primary == "queueing"  # ...but the request ranges say otherwise


def test_trap_batch1_worker_without_queue_is_compute_bound(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    steps = b.steps(4.5, 0.0102, 0.010, 2400, batch=1, tid=2000)
    for s, e in steps:  # each request arrives just as the worker frees up
        b.request(s - 0.0001, e - s + 0.0003)
    b.thread_cpu(1.0, tid=2000)
    d = diagnose(b.write())
    assert d.metrics["steady.queue_wait_ratio"] < 0.1
    assert d.primary == "compute_bound"


def test_trap_torch_import_and_cuda_init_is_not_cold_start(tmp_path):
    """A 10 s run that spends 4.5 s importing torch and creating the CUDA context."""
    b = RunBuilder(str(tmp_path), duration_s=10, gpu=True)
    b.event("import", 0.2, 3.0, "torch")
    b.steps(4.4, 0.01, 0.0095, 550, first_dur_s=0.1, dtype="bfloat16")
    b.thread_cpu(0.95)
    b.gpu_samples(95, from_s=4.5, gpm={"sm_active": 90, "sm_occupancy": 40, "tensor_active": 60,
                                        "dram_bw_util": 30, "fp32_active": 3, "fp16_active": 0})
    d = diagnose(b.write())
    assert d.metrics["startup.share"] > 0.4
    assert d.scores["cold_start"] == 0.0
    assert d.primary == "compute_bound"


def test_trap_slow_imports_beyond_baseline_count_when_measured(tmp_path):
    """A measured 9 s torch import on a slow filesystem is the baseline, not a cold-start finding."""
    b = RunBuilder(str(tmp_path), duration_s=20, gpu=False)
    b.event("import", 0.1, 9.0, "torch")
    b.steps(9.5, 0.02, 0.019, 500)
    b.thread_cpu(1.0)
    d = diagnose(b.write())
    assert d.metrics["startup.baseline_s"] == pytest.approx(9.0 + 0.3)  # the import + the interpreter allowance
    assert d.scores["cold_start"] == 0.0


def test_trap_socket_and_pipe_reads_without_disk_bytes_are_io(tmp_path):
    d = diagnose(F.io_socket(str(tmp_path)))
    assert d.metrics["steady.disk_read_bps"] == 0.0
    assert d.metrics["steady.read_chars_bps"] == 0.0
    assert d.primary == "io_bound"


def test_io_bound_on_gpu_too(tmp_path):
    assert diagnose(F.io_socket(str(tmp_path), gpu=True)).primary == "io_bound"


def test_queueing_on_gpu(tmp_path):
    assert diagnose(F.queueing_batch1(str(tmp_path), gpu=True)).primary == "queueing"


def test_cold_start_on_cpu(tmp_path):
    assert diagnose(F.cold_start(str(tmp_path), gpu=False)).primary == "cold_start"


def test_waiting_before_first_step_on_own_preprocessing_is_not_queueing(tmp_path):
    """Each request spends 15 ms in its own pre-processing, then a 5 ms step: no other step ran meanwhile."""
    b = RunBuilder(str(tmp_path), gpu=False)
    period = 0.025
    steps = b.steps(4.5, period, 0.005, int(25 / period))
    for s, e in steps:
        b.request(s - 0.015, e - s + 0.015)
    b.thread_cpu(0.85)
    d = diagnose(b.write())
    assert d.metrics["steady.queue_wait_ratio"] > 2
    assert d.metrics["steady.queue_behind_model_share"] < 0.1
    assert d.scores["queueing"] == 0.0
    assert d.primary == "cpu_bound"


def test_memory_bound_when_dram_binds_harder_than_math(tmp_path):
    """Elementwise work on big fp32 frames: FP32 pipes 30% busy, DRAM at 80% of peak."""
    b = RunBuilder(str(tmp_path), gpu=True)
    F._loop(b, 0.010, 0.97)
    b.thread_cpu(0.97)
    b.gpu_samples(97, from_s=F.STARTUP_S, gpm={"sm_active": 95, "sm_occupancy": 60, "tensor_active": 0,
                                                "dram_bw_util": 80, "fp32_active": 30, "fp16_active": 0})
    d = diagnose(b.write())
    assert d.primary == "memory_bound", d.scores
    assert d.scores["compute_bound"] < 0.3


def test_fp32_gemm_without_tensor_cores_is_compute_bound_and_gets_tf32_advice(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=True)
    F._loop(b, 0.050, 0.98, dtype="float32", shapes="[[64,512]]")
    b.thread_cpu(0.98)
    b.gpu_samples(99, from_s=F.STARTUP_S, gpm={"sm_active": 98, "sm_occupancy": 30, "tensor_active": 0,
                                                "dram_bw_util": 35, "fp32_active": 75, "fp16_active": 0})
    d = diagnose(b.write())
    assert d.primary == "compute_bound"
    assert "allow_tf32" in d.findings[0].recommendations[0].code


def test_launch_bound_without_kernel_windows(tmp_path):
    """NVML says 60% busy, but only 15% of the SMs are active and the stepping thread launches all the time."""
    b = RunBuilder(str(tmp_path), gpu=True)
    F._loop(b, 0.002, 0.96, batch=1, shapes="[[1,64]]")
    b.thread_cpu(0.97)
    b.gpu_samples(60, from_s=F.STARTUP_S, gpm={"sm_active": 15, "sm_occupancy": 5, "tensor_active": 1,
                                                "dram_bw_util": 3, "fp32_active": 2, "fp16_active": 0})
    d = diagnose(b.write())
    assert d.primary == "launch_bound", d.scores


def test_loader_workers_blocked_in_reads_are_io_bound(tmp_path):
    d = diagnose(F.loader_workers(str(tmp_path), reading=True))
    assert d.metrics["steady.worker_blocked_share"] > 0.8
    assert d.primary == "io_bound", d.scores


def test_loader_workers_computing_are_cpu_bound(tmp_path):
    d = diagnose(F.loader_workers(str(tmp_path), reading=False))
    assert d.metrics["steady.worker_blocked_share"] < 0.1
    assert d.primary == "cpu_bound", d.scores


def test_cpu_starved_stepping_thread_is_not_blocked_on_io(tmp_path):
    """Off CPU 60% of the time outside the model, but queued for a core, not blocked: cpu_bound, not io."""
    b = RunBuilder(str(tmp_path), gpu=False)
    period = 0.020
    steps = F._loop(b, period, 0.25)
    user = "<module> (app.py:1);main (app.py:20);tokenize (app.py:9)"
    b.stacks([(end, period * 0.75, user, False) for _, end in steps])
    b.thread_cpu(0.35, run_delay=0.55)
    b.host(1600)
    d = diagnose(b.write())
    assert d.metrics["steady.step_thread_runq_share"] == pytest.approx(0.55, abs=0.02)
    # schedstat: blocked 10% of the wall time, 22% of the time not queued (shares leave the queue out)
    assert d.metrics["steady.blocked_outside_share"] < 0.25
    assert d.primary == "cpu_bound", d.scores
