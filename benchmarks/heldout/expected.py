"""The label each held-out workload should get, per device, and why.

Written from how each program behaves, before looking at diag's verdicts, in
the same shape as tests/accuracy_expected.py. A device missing for a workload
means that run is not a valid test of any label. `None` as the label means the
program has no bottleneck: diag should give `primary: null` or only weak
scores (see NO_BOTTLENECK_MAX_SCORE).
"""

from __future__ import annotations

# workload (benchmarks/heldout/<name>.py) -> device -> (expected primary label or None, reason)
EXPECTED: dict[str, dict[str, tuple[str | None, str]]] = {
    "vit_bf16": {
        "cpu": ("compute_bound", "ViT (width 256, 6 blocks) in CPU bf16 autocast, batch 16, inputs pre-made: "
                "the stepping thread lives inside the model's GEMMs"),
        "cuda": ("compute_bound", "ViT-B/16 at 224 px, batch 256, bf16 autocast, inputs resident: back-to-back "
                 "tensor-core GEMMs, GPU near 100% busy with high tensor activity"),
    },
    "greedy_decode": {
        "cpu": ("compute_bound", "batch-1 decode on CPU: each token's forward (4 layers, ~60-token context) is "
                "the bulk of the time; the loop around it is a cat and an argmax"),
        "cuda": ("launch_bound", "batch 1, ~60 tokens of context, width 256: each forward is ~100 tiny kernels "
                 "of a few us, then .item() syncs each token; the GPU idles between launches"),
    },
    "norm_gelu_stack": {
        "cuda": ("memory_bound", "LayerNorm, GELU, residual, softmax and RMS rescale over a 1.1 GB bf16 map: "
                 "only elementwise/reduction kernels streaming DRAM, no GEMM"),
    },
    "record_loader": {
        "cpu": ("cpu_bound", "2 DataLoader workers inflate and int()-parse 3072 text values per record in Python; "
                "the main thread waits for batches while the workers burn both cores (files are in page cache)"),
        "cuda": ("cpu_bound", "same decode in 2 workers; the small ResNet takes well under a ms per batch on the GPU"),
    },
    "pipe_frames": {
        "cpu": ("io_bound", "frames arrive on a pipe at a fixed 20 fps from a decoder process; the small CNN "
                "needs a few ms per 4 frames, so the stepping thread mostly blocks in readinto() on the pipe"),
        "cuda": ("io_bound", "same paced pipe; the GPU CNN takes well under a ms"),
    },
    "pinned_stream": {
        "cuda": ("compute_bound", "128 MiB pinned upload per block on a side stream (~3 ms at PCIe 5 speed) "
                 "overlaps ~15 ms of bf16 MLP GEMMs; copies are hidden, the tensor cores are the limit"),
    },
    "burst_server": {
        "cpu": ("queueing", "bursts of 24 batch-1 requests into 4 pool threads (GIL, 2 cores): a request waits "
                "behind ~10 others for a ~1 ms service, while the average load is half a worker"),
        "cuda": ("queueing", "same bursts; batch-1 MLP calls of a few kernels leave the GPU mostly idle while "
                 "requests wait in the pool queue"),
    },
    "ort_wide_batch": {
        "cpu": ("compute_bound", "ORT conv net on batch-32 56x56 crops prepared in advance: session.run is "
                "nearly all the wall time"),
        "cuda": ("compute_bound", "run with --device cuda on a CPU-only onnxruntime: falls back to the CPU "
                 "provider (diag should flag the fallback) and session.run dominates"),
    },
    "multi_model_boot": {
        "cpu": ("cold_start", "writes and torch.loads three checkpoints (~330 MB), warms up 5 batch sizes, then "
                "scores just 6 batches of 4 and exits"),
        "cuda": ("cold_start", "same, plus CUDA init, moving weights and cudnn.benchmark autotuning per shape; "
                 "the 6 scoring batches take milliseconds"),
    },
    "idle_poller": {
        "cpu": (None, "sleeps ~0.4 s between polls that take a few ms: no resource is the limit; any label "
                "with a high score is a false alarm"),
        "cuda": (None, "same on the GPU: busy well under 1% of the time"),
    },
}

# For a None expectation, the highest label score that still counts as "no claim".
NO_BOTTLENECK_MAX_SCORE = 0.3


def expected_label(workload: str, device: str) -> str | None:
    """The expected primary label (None: no bottleneck or not a valid test; see EXPECTED)."""
    entry = EXPECTED.get(workload, {}).get(device)
    return entry[0] if entry else None


def verdict_ok(workload: str, device: str, primary: str | None, scores: dict[str, float]) -> bool:
    """True when diag's verdict matches the expectation for this run."""
    label, _ = EXPECTED[workload][device]
    if label is None:
        return primary is None or max(scores.values(), default=0.0) <= NO_BOTTLENECK_MAX_SCORE
    return primary == label
