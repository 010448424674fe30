"""What each label means, in words for the verdict banner (DESIGN.md, Labels)."""

MEANING: dict[str, str] = {
    "compute_bound": "math units saturated by the model (GEMM/conv)",
    "memory_bound": "device memory bandwidth is the limit",
    "transfer_bound": "host-device copies dominate",
    "launch_bound": "many tiny kernels; the GPU idles between launches",
    "cpu_bound": "host-side work outside the model starves the device",
    "io_bound": "the process waits on disk or network for its inputs",
    "cold_start": "one-time startup dominates",
    "queueing": "requests wait in a queue longer than they are served",
}
