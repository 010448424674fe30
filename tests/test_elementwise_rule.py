"""memory.elementwise_kernels judges the kernels the elementwise time is spent in (issue 13):
their time-weighted size, not the mean of every kernel in the trace."""

from __future__ import annotations

import json
from pathlib import Path

from diag.engine.diagnose import diagnose
from diag.store.importers import import_trace
from diag.store.kineto import kernel_category

BN_BWD = "void at::native::batch_norm_backward_kernel<c10::BFloat16>(x)"
ADD = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>(x)"
GEMM = "Cijk_Ailk_Bljk_BBS_BH_MT64x64x32"


def _trace(path: Path, kernels: list[tuple[str, float]]) -> str:
    """A GPU-only Kineto trace: the kernels back to back on one stream (durations in us)."""
    events, t = [], 0.0
    for name, dur in kernels:
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": t, "dur": dur, "pid": 0, "tid": 7,
                       "args": {"device": 0, "stream": 7, "correlation": len(events) + 1}})
        t += dur + 0.5
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_long_elementwise_kernels_among_many_short_ones_are_memory_bound(tmp_path: Path) -> None:
    # mean of all kernels 6 us (many 2 us GEMMs), but 64% of the time is in 40 us batch-norm kernels
    kernels = [(BN_BWD, 40.0)] * 20 + [(GEMM, 2.0)] * 200 + [(ADD, 4.0)] * 10 + [(GEMM, 30.0)] * 3
    d = diagnose(import_trace(_trace(tmp_path / "t.json", kernels * 3)))
    assert d.metrics["steady.kernel_mean_us"] < 10 < d.metrics["steady.kernel_elementwise_wmean_us"]
    assert d.primary == "memory_bound"
    assert "memory.elementwise_kernels" in [f.rule for f in d.findings]


def test_tiny_elementwise_kernels_are_not_memory_bound(tmp_path: Path) -> None:
    # the same share of elementwise time in 2 us kernels: launch latency and ramp-up, not bandwidth
    kernels = [(ADD, 2.0)] * 400 + [(GEMM, 100.0)] * 4
    d = diagnose(import_trace(_trace(tmp_path / "t.json", kernels * 3)))
    assert d.metrics["steady.kernel_elementwise_share"] > 0.6
    assert d.metrics["steady.kernel_elementwise_wmean_us"] < 3
    assert "memory.elementwise_kernels" not in [f.rule for f in d.findings]


def test_miopen_tensor_ops_and_pooling_are_elementwise() -> None:
    for name in ("SubTensorOpWithScalar1d", "SubTensorOpWithCastTensor1d", "Op2dTensorGeneric",
                 "void at::native::(anonymous namespace)::max_pool_backward_nchw<c10::BFloat16, float>(x)"):
        assert kernel_category(name) == "elementwise", name
    assert kernel_category("naive_conv_fwd_nchw") == "conv"
