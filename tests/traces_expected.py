"""The public-trace corpus (tests/data/traces/, sources in SOURCES.md): what diag must say.

One row per trace: the expected primary label, or DECLINE (no label, a reason that
names what the trace lacks), and the reason judged from the trace itself, before
diag's rules were changed for it (docs/accuracy.md, "Imported traces").
"""

from __future__ import annotations

DECLINE = "decline"

# path under tests/data/traces -> (expected, one-line reason from the trace)
EXPECTED: dict[str, tuple[str, str]] = {
    "hta_2021_format_tiny.json.gz": (DECLINE, "2021 format (Kernel/Runtime categories), 4 kernels, 0.03 ms of GPU work"),
    "hta_a100_ddp_nccl.json.gz": ("cpu_bound", "GPU idle 71% with nothing queued (kernels start 13 us after launch); host in DDP forward/optimizer ops; all-reduce 29% of kernel time, 6% exposed"),
    "hta_a100_sendrecv_16ranks.json.gz": ("communication_bound", "rank 0 of 16: SendRecv 48% of kernel time, 16% exposed; the GPU idles 63% with work queued behind it, never for the host"),
    "hta_alexnet_benchmark.json.gz": (DECLINE, "no steps, two forward calls after 30 s of CUDA init and a 10.8 s cuDNN first call: GPU idle 99% of its span"),
    "hta_backward_thread.json.gz": (DECLINE, "one kernel"),
    "hta_cpu_only_gloo.json.gz": (DECLINE, "gloo rank 34 of 300, CPU ops only: no GPU events"),
    "hta_cupti_profiler_no_kernels.json.gz": (DECLINE, "CUPTI profiler ranges and runtime calls, no kernel activity"),
    "hta_mi250_minitoy.json.gz": (DECLINE, "ROCm toy: 14 kernels, 0.11 ms of GPU work in two steps"),
    "hta_mtia_inference.json.gz": (DECLINE, "MTIA accelerator events (mtia_ccp_events), no CUDA/ROCm kernels"),
    "hta_rank_non_gpu.json.gz": (DECLINE, "CPU ops only: no GPU events"),
    "hta_ranks_sendrecv/rank-0.json.gz": ("communication_bound", "SendRecv 65% of kernel time, 28% of the GPU timeline exposed"),
    "hta_ranks_sendrecv/rank-1.json.gz": ("communication_bound", "SendRecv 58% of kernel time, 25% exposed"),
    "hta_triton_one_kernel.json.gz": (DECLINE, "one 1.8 us Triton kernel"),
    "hta_v100_ddp_rank1.json.gz": ("cpu_bound", "GPU idle 39% with nothing queued (host in compiled-function CPU work); all-reduce 32% of kernel time but 17% exposed"),
    "hta_v100_resnet_train.json.gz": ("compute_bound", "GPU 97% busy, cuDNN convolutions and GEMMs the largest class"),
    "tracelens_b200_eager_tp8.json.gz": ("launch_bound", "B200 TP8 eager decode: 768 kernels of 14 us mean, GPU idle 75% waiting for launches"),
    "tracelens_h100_bert_small.json.gz": ("launch_bound", "60 kernels of 5 us mean, GPU 8% busy, idle between launches"),
    "tracelens_h100_qwen05b.json.gz": ("memory_bound", "GPU 92% busy, 63% of kernel time elementwise/copy kernels (HF generate, small batch)"),
    "tracelens_h100_vit_falconsai.json.gz": ("launch_bound", "154 kernels of 8 us mean, GPU 16% busy"),
    "tracelens_mi210_gpu_only.json.gz": ("memory_bound", "GPU-only trace, 89% busy: batch-norm backward, elementwise and transposes 56% of kernel time, MIOpen convs 32%"),
    "tracelens_mi300_compile_triton.json.gz": ("compute_bound", "no steps; 12 kernels back to back (12.5 ms, GPU 100% busy), Tensile GEMM and attn_fwd 93%"),
    "tracelens_mi300_qwen05b.json.gz": ("compute_bound", "GPU 91% busy, Tensile GEMMs and attention 52% of kernel time"),
    "tracelens_mi300_resnet_rccl.json.gz": ("communication_bound", "RCCL ncclDevKernel_Generic 74% of kernel time, 64% of the timeline not overlapped"),
    "tracelens_mi300_sglang_decode.json.gz": (DECLINE, "one decode step: the GPU waits 98% of it with work queued behind a blocking hipMemcpyWithStream"),
    "tracelens_mi300_sglang_prefilldecode.json.gz": (DECLINE, "the first half of the GPU span is a 493 ms wait with work queued behind a blocking copy; what it waited on is not in the trace"),
    "tracelens_vllm_decode_graph.json.gz": ("compute_bound", "no steps; graph replay, kernels back to back (GPU 99% busy), _matmul_ogs and Tensile GEMMs 86%"),
    "tracelens_vllm_prefilldecode_piecewise.json.gz": ("compute_bound", "no steps; GPU 100% busy, _matmul_ogs GEMMs 95% of kernel time"),
}

# Traces diag still gets wrong, with why; the test expects them to fail until fixed.
KNOWN_MISSES: dict[str, str] = {}
