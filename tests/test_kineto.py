"""Kineto chrome-trace parsing: categories, memcpy kinds, time base, the kernels table."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from diag.store.kineto import kernel_category, load_trace, memcpy_kinds, parse_trace
from diag.store.manifest import SCHEMA, write_manifest
from diag.store.run import open_run

TRACES = os.path.join(os.path.dirname(__file__), "data", "traces")
BASE = 1796000000000000000
T0_US = 5000000000000.0


@pytest.mark.parametrize("name, category", [
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "gemm"),
    # GroupNorm statistics on an H200 (seen in tests/data/gpu/image_enhance)
    ("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float>(long, float, float const*, float*, float*)", "norm"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&)"
     "::{lambda()#2}, std::array<char*, 2ul> >(int)", "elementwise"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
     "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8::Params)", "gemm"),
    ("ampere_sgemm_128x64_tn", "gemm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float)", "norm"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)", "attention"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
     "_kernel__5x_cublas", "gemm"),
    ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", "attention"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<float>", "conv"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "conv"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float> > >", "reduction"),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>", "reduction"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", "elementwise"),
    ("triton_poi_fused_add_mul_0", "elementwise"),
    ("triton_red_fused__softmax_1", "reduction"),
    ("triton_tem_fused_addmm_2", "gemm"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4>", "elementwise"),
    ("void at::native::index_elementwise_kernel<128, 4>", "elementwise"),
    ("void convert_bf16_to_fp8_kernel", "other"),
])
def test_kernel_category(name: str, category: str) -> None:
    assert kernel_category(name) == category


def test_memcpy_kinds() -> None:
    assert memcpy_kinds("Memcpy HtoD (Pageable -> Device)") == ("HtoD", "pageable", "device")
    assert memcpy_kinds("Memcpy DtoH (Device -> Pinned)") == ("DtoH", "device", "pinned")
    assert memcpy_kinds("Memcpy DtoD (Device -> Device)") == ("DtoD", "device", "device")
    assert memcpy_kinds("Memcpy HtoD") == ("HtoD", None, None)
    assert memcpy_kinds("something else") == (None, None, None)


def test_parse_cuda_trace() -> None:
    tables = parse_trace(load_trace(os.path.join(TRACES, "kineto_cuda_synthetic.json")), window=3)
    kinds = [r["kind"] for r in tables.kernels]
    assert kinds.count("kernel") == 12 and kinds.count("memcpy") == 4 and kinds.count("memset") == 2
    first = min(tables.kernels, key=lambda r: r["ts_ns"])
    # baseTimeNanoseconds + ts(µs) * 1000
    assert first["ts_ns"] == BASE + round((T0_US + 225.0) * 1000)
    assert first["dur_ns"] == 40_000 and first["window"] == 3
    assert first["copy_kind"] == "HtoD" and first["src_mem"] == "pageable" and first["bytes"] == 1048576
    gemm = next(r for r in tables.kernels if r["name"].startswith("nvjet"))
    assert gemm["category"] == "gemm" and gemm["grid"] == "[132,1,1]" and gemm["block"] == "[384,1,1]"
    assert gemm["device"] == 0 and gemm["stream"] == 7
    cats = {r["category"] for r in tables.kernels}
    assert cats == {"gemm", "elementwise", "norm", "attention", "reduction", "memcpy", "memset"}
    # ProfilerStep#N -> steps, user_annotation -> ranges (nested), gpu_user_annotation ignored.
    assert [s["seq"] for s in tables.steps] == [21, 22]
    assert tables.steps[0]["dur_ns"] == 900_000 and tables.steps[0]["pid"] == 4242
    names = [(r["name"], r["kind"], r["depth"]) for r in tables.ranges]
    assert names == [("request", "request", 0), ("preprocess", "stage", 1)] * 2
    assert tables.pid == 4242


def test_parse_recorded_cpu_trace() -> None:
    """A real torch 2.13 CPU profiler trace: no GPU rows, record_function ranges nested."""
    tables = parse_trace(load_trace(os.path.join(TRACES, "kineto_cpu_torch213.json")))
    assert tables.kernels == []
    assert [r["name"] for r in tables.ranges] == ["request", "preprocess"] * 3
    assert [r["depth"] for r in tables.ranges] == [0, 1] * 3
    trace = load_trace(os.path.join(TRACES, "kineto_cpu_torch213.json"))
    ts = tables.ranges[0]["ts_ns"]
    # Recorded traces carry a base: times land on the Unix epoch (after 2025).
    assert trace["baseTimeNanoseconds"] > 0 and ts > 1_735_000_000 * 10**9


def test_old_trace_aligned_to_window_start() -> None:
    trace = load_trace(os.path.join(TRACES, "kineto_old_nobase.json"))
    start = 1_796_000_000_000_000_000
    tables = parse_trace(trace, window=1, start_ns=start)
    step = tables.steps[0]
    assert step["ts_ns"] == start and step["seq"] == 5  # earliest event sits on the window start
    gemm, copy = sorted(tables.kernels, key=lambda r: r["ts_ns"])
    assert gemm["ts_ns"] == start + 10_000 and gemm["category"] == "gemm" and gemm["stream"] == 7
    assert copy["copy_kind"] == "DtoD" and copy["bytes"] == 512


def test_kernels_table_of_run(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "raw" / "kineto").mkdir(parents=True)
    write_manifest(str(run), {"schema": SCHEMA, "start_ns": BASE, "end_ns": BASE + 10**12})
    shutil.copy(os.path.join(TRACES, "kineto_cuda_synthetic.json"), run / "raw" / "kineto" / "window0.4242.json")
    shutil.copy(os.path.join(TRACES, "kineto_old_nobase.json"), run / "raw" / "kineto" / "window1.4242.json")
    (run / "raw" / "kineto" / "window2.4242.json").write_text('{"traceEvents": [')  # cut short by a kill
    start = BASE + 5 * 10**9
    (run / "raw" / "windows.4242.jsonl").write_text(json.dumps(
        {"window": 1, "ts_ns": start, "dur_ns": 1, "steps": 5, "profiler_start_ns": 1, "trace": "x", "pid": 4242}
    ) + "\n")
    df = open_run(str(run)).table("kernels")
    assert len(df) == 18 + 2
    assert sorted(df["window"].unique()) == [0, 1]
    assert set(df["pid"]) == {4242}
    old = df[df["window"] == 1].sort_values("ts_ns")
    assert int(old["ts_ns"].iloc[0]) == start + 10_000
