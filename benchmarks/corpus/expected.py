"""The label each corpus program should get, per device, and why.

Written from how each program behaves, before looking at diag's verdicts, in
the same shape as benchmarks/heldout/expected.py. A device missing for a
program means that run is not a valid test of any label (or, for the
transformers programs on CPU, too slow to start on the 2-core box: importing
transformers alone takes longer than the 10 s a CPU corpus program may take).
"""

from __future__ import annotations

# program (benchmarks/corpus/<name>.py) -> device -> (expected primary label or None, reason)
EXPECTED: dict[str, dict[str, tuple[str | None, str]]] = {
    "text_encoder_boot": {
        "cpu": ("cold_start", "6 buckets each traced, frozen, saved zlib-compressed, loaded back and warmed up: "
                "most of the run is start-up, then a 2 s burst"),
        "cuda": ("cold_start", "same start-up plus CUDA init; the burst's batches take milliseconds"),
    },
    "pillow_tagger": {
        "cpu": ("cpu_bound", "Pillow decodes 960x720 JPEGs from in-memory bytes and resizes them on the stepping "
                "thread (on CPU all the time); the small CNN on 128 px crops is a small part"),
        "cuda": ("cpu_bound", "same decode on the host; the CNN takes well under a ms on the GPU"),
    },
    "ort_cuda_missing": {
        "cpu": ("compute_bound", "asks for the CUDA provider, silently gets the CPU one; session.run of the MLP "
                "on batch 256 is nearly all the time (the fallback should be a finding)"),
        "cuda": ("compute_bound", "the GPU box's onnxruntime is a CPU build: same CPU fallback, session.run "
                 "dominates, the GPU is idle"),
    },
    "hf_prefill_scoring": {
        "cuda": ("compute_bound", "generate() with 1 new token on batch 32 x 1024 tokens, bf16, 7B-wide layers: the prefill's "
                 "GEMMs keep the GPU busy; the host waits in generate()'s own sync"),
    },
    "hf_greedy_decode": {
        "cuda": ("launch_bound", "batch-1 greedy decode, width 512, 6 layers, KV cache: each token is a few "
                 "hundred tiny kernels; the GPU idles between launches"),
    },
    "gzip_records": {
        "cpu": ("cpu_bound", "gzip.GzipFile.read over an in-memory archive: the stepping thread decompresses "
                "in read frames, on the CPU; the MLP is a small part"),
        "cuda": ("cpu_bound", "same decompression on the host"),
    },
    "socket_feed": {
        "cpu": ("io_bound", "a producer sends a window every 100 ms over TCP; the 1-D CNN takes a few ms, so the "
                "stepping thread mostly blocks in recv_into"),
        "cuda": ("io_bound", "same paced socket"),
    },
    "threadpool_prep": {
        "cpu": ("cpu_bound", "2 pool threads hash n-grams in pure Python (GIL: one core's worth) while the "
                "stepping thread waits on their futures; the MLP is tiny"),
        "cuda": ("cpu_bound", "same Python featurization on the host"),
    },
}

# For a None expectation, the highest label score that still counts as "no claim".
NO_BOTTLENECK_MAX_SCORE = 0.3
# A correct verdict must beat the runner-up by at least this much (issue 12).
MIN_MARGIN = 0.2


def verdict_ok(program: str, device: str, primary: str | None, scores: dict[str, float]) -> bool:
    """True when diag's verdict matches the expectation for this run."""
    label, _ = EXPECTED[program][device]
    if label is None:
        return primary is None or max(scores.values(), default=0.0) <= NO_BOTTLENECK_MAX_SCORE
    return primary == label
