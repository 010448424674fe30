"""Two-rank torchrun jobs recorded on two H200s (benchmarks/multi_gpu/tp_linear.py, 5 s, defaults).

`comm`: 8 bf16 Linear(1024) layers on 4096 tokens, each followed by an all-reduce
of its activations; `compute`: 8 Linear(8192) on 256 tokens, one 16 KB
all-reduce per step.
"""

from __future__ import annotations

from pathlib import Path

from diag.engine import diagnose
from diag.store.run import open_run

DATA = Path(__file__).parent / "data" / "multi_gpu"


def test_communication_heavy_job_is_communication_bound() -> None:
    d = diagnose(open_run(str(DATA / "h200x2_comm")))
    assert d.primary == "communication_bound" and d.margin >= 0.2
    assert d.metrics["steady.comm_kernel_share"] > 0.8  # NCCL all-reduce kernels, not "elementwise"
    # 8 MB all-reduces: sizes from the collective hooks, the transfer at ~200 GB/s of NVLink's 450
    assert d.metrics["steady.comm_sized_fraction"] == 1.0
    assert 150e9 < d.metrics["steady.comm_bw"] < d.metrics["run.link_bw"] == 450e9
    assert d.metrics["steady.comm_exposed_transfer_step_p50"] > 0.35
    kernels = open_run(str(DATA / "h200x2_comm")).manifest["collectors"]["kernels"]
    assert kernels["schedule"].startswith("by step number only") and kernels["world_size"] == 2


def test_compute_heavy_job_is_compute_bound() -> None:
    """Rank 0's 16 KB all-reduce waits ~0.15-7 ms for rank 1 (still in its matmuls); rank 1's takes
    6.6 us. The wait is the peer's compute, not communication (issue 17)."""
    d = diagnose(open_run(str(DATA / "h200x2_compute")))
    assert d.primary == "compute_bound" and d.margin >= 0.2
    assert d.metrics["steady.comm_wait_fraction"] > 0.9
    assert d.metrics["steady.comm_exposed_transfer_share"] < 0.05 < 0.2 < d.metrics["steady.comm_exposed_wait_share"]
    assert d.scores["communication_bound"] == 0
    assert "communication.peer_wait" in [f.rule for f in d.findings]
