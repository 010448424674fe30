"""Command line and stop flag shared by the corpus programs (their own, not heldout's or sample_workloads')."""

from __future__ import annotations

import argparse
import signal
import threading
import time


def options(about: str, seconds: float = 8.0) -> argparse.Namespace:
    """`--device auto|cpu|cuda` and `--seconds N` (the steady part's length)."""
    p = argparse.ArgumentParser(description=about)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--seconds", type=float, default=seconds)
    a = p.parse_args()
    if a.device == "auto":
        try:
            import torch

            a.device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            a.device = "cpu"
    return a


class Stop:
    """True once `seconds` have passed or SIGINT/SIGTERM arrived."""

    def __init__(self, seconds: float) -> None:
        self.event = threading.Event()
        self.t0 = time.monotonic()
        self.seconds = seconds
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.event.set())

    def __bool__(self) -> bool:
        return self.event.is_set() or time.monotonic() - self.t0 >= self.seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def report(program: str, count: int, what: str, seconds: float, device: str) -> None:
    """One throughput line at the end."""
    print(f"[{program}] {count} {what} / {seconds:.2f} s ({device})", flush=True)
