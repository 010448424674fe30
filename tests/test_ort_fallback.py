"""ONNX Runtime provider fallback: the recorder stores facts, one analysis rule decides."""

from __future__ import annotations

from diag.analysis.runtime import provider_fallback

CUDA, TRT, CPU = "CUDAExecutionProvider", "TensorrtExecutionProvider", "CPUExecutionProvider"


def test_gpu_asked_and_none_got_is_a_fallback() -> None:
    assert provider_fallback([CUDA, CPU], [CPU])
    assert provider_fallback([(CUDA, {"device_id": 0}), CPU], [CPU])  # (name, options) pairs


def test_not_a_fallback() -> None:
    assert not provider_fallback([CPU], [CPU])  # never asked for a GPU
    assert not provider_fallback([TRT, CUDA, CPU], [CUDA, CPU])  # first choice missing, still on the GPU
    assert not provider_fallback(None, [CPU])  # default providers
    assert not provider_fallback([CUDA], None)
