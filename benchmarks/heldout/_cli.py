"""Command line, stop signal and report line shared by the held-out workloads.

Written apart from sample_workloads/_common.py on purpose: the held-out set
must not share code with the programs diag was tuned on.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time


def options(about: str, seconds: float = 15.0, needs_torch_cuda: bool = True) -> argparse.Namespace:
    """`--device auto|cpu|cuda` and `--seconds N`; device comes back as "cpu" or "cuda"."""
    p = argparse.ArgumentParser(description=about)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--seconds", type=float, default=seconds)
    a = p.parse_args()
    if a.device == "auto" or (a.device == "cuda" and needs_torch_cuda):
        import torch

        has_gpu = torch.cuda.is_available()
        if a.device == "cuda" and not has_gpu:
            p.error("no CUDA device visible to torch")
        if a.device == "auto":
            a.device = "cuda" if has_gpu else "cpu"
    return a


class StopFlag:
    """Set by SIGINT/SIGTERM (diag --duration sends SIGINT) or when the time is up."""

    def __init__(self, seconds: float) -> None:
        self.event = threading.Event()
        self.t0 = time.monotonic()
        self.seconds = seconds
        # benchmarks/overhead.py asks for the time to the first step (first truth test of the flag)
        self.tell_first_step = os.environ.get("DIAG_BENCH_FIRST_STEP") == "1"
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.event.set())

    def __bool__(self) -> bool:
        if self.tell_first_step:
            self.tell_first_step = False
            age = process_age()
            print(f"DIAG_BENCH first_step_s={-1.0 if age is None else age:.3f}", flush=True)
        return self.event.is_set() or time.monotonic() - self.t0 >= self.seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def sleep(self, s: float) -> None:
        """Sleep up to `s` seconds, waking early on a signal."""
        self.event.wait(max(0.0, s))


def process_age() -> float | None:
    """Seconds since this process started, from /proc (None off Linux)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            start_ticks = int(f.read().rpartition(b")")[2].split()[19])
        return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def report(program: str, count: int, what: str, seconds: float, device: str, note: str = "") -> None:
    """The one throughput line every held-out program prints at the end."""
    rate = count / seconds if seconds > 0 else 0.0
    print(f"[{program}] {count} {what} / {seconds:.2f} s -> {rate:.2f} {what}/s ({device}){' ' + note if note else ''}",
          flush=True)
