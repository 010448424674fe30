"""Shared command line and shutdown handling for the sample workloads.

Every workload takes `--device auto|cpu|cuda` and `--seconds N`, runs until the
time is up or it gets SIGINT/SIGTERM, then prints one summary line and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections.abc import Callable


def torch_sees_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def parse_args(
    description: str,
    seconds: float = 20.0,
    cuda_available: Callable[[], bool] = torch_sees_cuda,
    cuda_required: bool = True,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """Parse the common flags; `args.device` comes back as "cpu" or "cuda".

    `cuda_required=False` lets `--device cuda` through on a machine without a GPU
    (for runtimes that fall back to the CPU by themselves); `extra(parser)` adds a
    workload's own flags.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--seconds", type=float, default=seconds, help="how long to run")
    if extra is not None:
        extra(parser)
    args = parser.parse_args()
    if args.device == "auto":
        args.device = "cuda" if cuda_available() else "cpu"
    if args.device == "cuda" and cuda_required and not cuda_available():
        parser.error("--device cuda asked for, but no CUDA device is available")
    return args


class Deadline:
    """True once `seconds` have passed or SIGINT/SIGTERM arrived (diag --duration sends SIGINT)."""

    def __init__(self, seconds: float) -> None:
        self.stop = threading.Event()
        self.start = time.perf_counter()
        self.end = self.start + seconds
        # benchmarks/overhead.py asks for the time to the first step (first done() call)
        self._tell_first_step = os.environ.get("DIAG_BENCH_FIRST_STEP") == "1"
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stop.set()

    def restart(self, seconds: float) -> None:
        """Start the clock again (signals already received still count)."""
        self.start = time.perf_counter()
        self.end = self.start + seconds

    def done(self) -> bool:
        if self._tell_first_step:
            self._tell_first_step = False
            print_first_step()
        return self.stop.is_set() or time.perf_counter() >= self.end

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def wait(self) -> None:
        """Block the calling (main) thread until the deadline or a signal."""
        while not self.done():
            self.stop.wait(0.1)


def since_process_start() -> float | None:
    """Seconds since this process was started (Linux /proc), None elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, ticks since boot
        return time.clock_gettime(time.CLOCK_BOOTTIME) - started
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def print_first_step() -> None:
    """The optional line benchmarks/overhead.py reads: process start to the first step."""
    since = since_process_start()
    print(f"DIAG_BENCH first_step_s={-1.0 if since is None else since:.3f}", flush=True)


def sync(device: str) -> None:
    """Wait for queued GPU work, so timings cover it."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def summary(name: str, device: str, items: int, unit: str, seconds: float, extra: str = "") -> None:
    """Print the one-line throughput summary every workload ends with."""
    rate = items / seconds if seconds > 0 else 0.0
    tail = f", {extra}" if extra else ""
    print(f"{name}: {items} {unit} in {seconds:.1f} s = {rate:.1f} {unit}/s on {device}{tail}", flush=True)
