"""The label diag should give each sample workload, per device, and why.

Read by the accuracy tests only; diag itself never reads this file. A device
missing for a workload means that run is not a valid test of any label (for
example memory_bound needs a GPU).
"""

from __future__ import annotations

# workload (sample_workloads/<name>.py) -> device -> (expected primary label, reason)
EXPECTED: dict[str, dict[str, tuple[str, str]]] = {
    "encoder_batch": {
        "cpu": (
            "compute_bound",
            "batch 32 x 128 tokens through a 4-layer encoder: nearly all time in GEMMs inside forward",
        ),
        "cuda": (
            "compute_bound",
            "fp32 BERT-large-shaped encoder, batch 64 x 512: long GEMM kernels back to back, GPU saturated",
        ),
    },
    "image_enhance": {
        "cuda": (
            "memory_bound",
            "only elementwise ops and a GroupNorm on 8 x 4K fp32 frames: DRAM bandwidth, no GEMM",
        ),
    },
    "mlp_batch": {
        "cuda": (
            "transfer_bound",
            "256 MiB pageable H2D copy per step feeds a 2-layer MLP that runs in well under a millisecond",
        ),
    },
    "ranker_mlp": {
        "cuda": (
            "launch_bound",
            "batch 1 through 32 tiny residual blocks: ~135 short kernels per step, GPU idle between launches",
        ),
    },
    # Provisional until recorded on the H200 (issue 16): the launches are gone, the tiny kernels are not.
    "ranker_graph": {
        "cuda": (
            "launch_bound",
            "ranker_mlp's batch-1 step replayed as one CUDA graph: no launch cost left, but ~135 kernels of a few "
            "microseconds each leave the SMs nearly empty; advice is to batch, never to use CUDA graphs",
        ),
    },
    "ranker_compiled": {
        "cuda": (
            "launch_bound",
            "ranker_mlp's model under torch.compile(mode='reduce-overhead'), batch 1, 30 s: fused kernels replayed as "
            "CUDA graphs, still microseconds of work each; never advised to use reduce-overhead",
        ),
    },
    "cnn_pipeline": {
        "cpu": (
            "cpu_bound",
            "numpy augmentation of 32 images per step on the main thread takes several times the tiny CNN's forward",
        ),
        "cuda": (
            "cpu_bound",
            "same numpy augmentation; the tiny CNN takes about a millisecond on the GPU, which waits for the host",
        ),
    },
    "ort_tabular": {
        "cpu": (
            "cpu_bound",
            "pure-Python CSV parsing (strptime, crc32 hashing) is ~10x the ORT session.run time per batch",
        ),
        "cuda": (
            "cpu_bound",
            "same parsing; the CPU-only onnxruntime falls back from CUDAExecutionProvider (diag should also report that)",
        ),
    },
    "shard_embedder": {
        "cpu": (
            "io_bound",
            "each step waits ~70 ms on a socket read from the paced local object store; the MLP takes a few ms",
        ),
        "cuda": ("io_bound", "same socket waits; the GPU MLP step is well under a millisecond"),
    },
    "vgg_job": {
        "cpu": (
            "cold_start",
            "builds, saves and torch.loads a ~550 MB checkpoint, then scores only 4 batches of 4 images and exits",
        ),
        "cuda": (
            "cold_start",
            "~850 MB checkpoint load, move to GPU and cudnn.benchmark warm-up, then 4 batches of a few ms",
        ),
    },
    "encoder_server": {
        "cpu": (
            "queueing",
            "Poisson arrivals at 95% of a single batch-1 worker's rate: requests wait several service times",
        ),
        "cuda": (
            "queueing",
            "same arrival process; batch-1 requests wait in line while the GPU has room for much larger batches",
        ),
    },
}


def expected_label(workload: str, device: str) -> str | None:
    """The expected primary label, or None where the run is not a valid test."""
    entry = EXPECTED.get(workload, {}).get(device)
    return entry[0] if entry else None
