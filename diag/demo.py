"""`diag demo`: which bundled sample workload to profile, and how."""

from __future__ import annotations

import os
import sys

DEMO_WORKLOAD = "cnn_pipeline.py"


def demo_command(seconds: float) -> list[str]:
    """The command `diag demo` profiles: a bundled sample workload, device auto."""
    import diag._samples

    path = os.path.join(list(diag._samples.__path__)[0], DEMO_WORKLOAD)
    return [sys.executable, path, "--device", "auto", "--seconds", f"{seconds:g}"]
