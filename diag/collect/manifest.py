"""What run.json says about the machine, the software and the environment.

Only environment variables that change inference behaviour are kept; under an
allowed prefix, one whose name suggests a secret keeps its name but not its
value, and URL credentials are hidden (collect/redact.py).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

import psutil

from diag.collect.redact import redact_env

ENV_PREFIXES = ("CUDA_", "CUDNN_", "CUBLAS", "NCCL_", "NVIDIA_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_",
                "ORT_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "TF_", "XLA_", "TRITON_")
ENV_NAMES = ("TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LD_PRELOAD",
             "MALLOC_ARENA_MAX", "PYTHONHASHSEED", "CUDA_LAUNCH_BLOCKING")


def allowed_env(environ: dict[str, str], redact: bool = True) -> dict[str, str]:
    """The allowlisted subset of `environ`, redacted unless `redact` is False (--no-redact)."""
    out = {k: v for k, v in environ.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    return dict(sorted((redact_env(out) if redact else out).items()))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_info() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        "cores_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else psutil.cpu_count(),
        "ram_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
    }


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, Any]:
    """Versions seen from diag's own interpreter; the target's own are merged in at the end."""
    from diag import __version__

    ort = _version("onnxruntime-gpu") or _version("onnxruntime")
    return {"python": platform.python_version(), "diag": __version__, "torch": _version("torch"),
            "onnxruntime": ort, "nvidia-ml-py": _version("nvidia-ml-py"), "py-spy": _version("py-spy"),
            "executable": sys.executable}
