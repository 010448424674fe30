"""What run.json says about the machine, the software and the environment.

Only environment variables that change inference behaviour are kept, and never
one whose name suggests a secret, even under an allowed prefix.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

import psutil

ENV_PREFIXES = ("CUDA_", "CUDNN_", "CUBLAS", "NCCL_", "NVIDIA_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_",
                "ORT_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "TF_", "XLA_", "TRITON_")
ENV_NAMES = ("TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LD_PRELOAD",
             "MALLOC_ARENA_MAX", "PYTHONHASHSEED", "CUDA_LAUNCH_BLOCKING")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")


def allowed_env(environ: dict[str, str]) -> dict[str, str]:
    """The allowlisted subset of `environ`."""
    out = {}
    for name, value in environ.items():
        if any(word in name.upper() for word in SECRET_WORDS):
            continue
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            out[name] = value
    return dict(sorted(out.items()))


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
