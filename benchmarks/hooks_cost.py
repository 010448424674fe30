"""What does one step cost under diag's hooks, in microseconds?

Installs the torch hooks on the real torch and the onnxruntime hooks on a fake
`onnxruntime` module (a session whose `run` returns at once, so only the hook
is measured), then times a tiny nested `nn.Module` forward and an ORT-like
`run` with the hooks and plain, interleaved (plain, hooked, plain, hooked...).
Prints the median per-step time of each and the median extra cost per step.
Rows are flushed between rounds, outside the timed region, as the recorder's
flusher thread would do off the target's thread.

    python benchmarks/hooks_cost.py [--rounds 41] [--steps 1000]

To compare with another tree: `PYTHONPATH=/path/to/tree python benchmarks/hooks_cost.py`.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any


def _per_step_us(fn: Callable[[], Any], steps: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        fn()
    return (time.perf_counter_ns() - t0) / steps / 1e3


def interleaved(call: Callable[[], Any], use_plain: Callable[[], None], use_hooked: Callable[[], None],
                flush: Callable[[], None], rounds: int, steps: int) -> dict[str, float]:
    """Median µs per step plain and hooked, and the median of the per-round differences."""
    plain, hooked, extra = [], [], []
    for _ in range(rounds):
        use_plain()
        p = _per_step_us(call, steps)
        use_hooked()
        h = _per_step_us(call, steps)
        flush()
        plain.append(p)
        hooked.append(h)
        extra.append(h - p)
    return {"plain_us": statistics.median(plain), "hooked_us": statistics.median(hooked),
            "extra_us": statistics.median(extra)}


def torch_case(rec: Any, rounds: int, steps: int) -> dict[str, float]:
    import torch

    from diag.collect.hooks import torch as torch_hooks

    torch_hooks.install(rec, torch)
    hooked = torch.nn.Module.__call__
    plain = hooked.__wrapped__
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    x = torch.randn(2, 4)

    def use(fn: Any) -> Callable[[], None]:
        def set_call() -> None:
            torch.nn.Module.__call__ = fn
        return set_call

    with torch.inference_mode():
        for _ in range(200):  # warm up
            model(x)
        try:
            return interleaved(lambda: model(x), use(plain), use(hooked), rec.flush, rounds, steps)
        finally:
            torch.nn.Module.__call__ = hooked


def _fake_ort() -> Any:
    class InferenceSession:
        def __init__(self, path: Any, sess_options: Any = None, providers: Any = None) -> None:
            self._providers = list(providers or ["CPUExecutionProvider"])

        def get_providers(self) -> list[str]:
            return self._providers

        def run(self, output_names: Any, input_feed: Any, run_options: Any = None) -> list[Any]:
            return [None]

    return types.SimpleNamespace(InferenceSession=InferenceSession, __version__="fake",
                                 get_device=lambda: "CPU")


def ort_case(rec: Any, rounds: int, steps: int) -> dict[str, float]:
    import numpy as np

    from diag.collect.hooks import ort as ort_hooks

    ort = _fake_ort()
    ort_hooks.install(rec, ort)
    cls = ort.InferenceSession
    hooked = cls.run
    plain = hooked.__wrapped__
    sess = cls(b"model", providers=["CPUExecutionProvider"])
    feed = {"X": np.ones((5, 4), dtype=np.float32)}

    def use(fn: Any) -> Callable[[], None]:
        def set_run() -> None:
            cls.run = fn
        return set_run

    for _ in range(200):
        sess.run(None, feed)
    return interleaved(lambda: sess.run(None, feed), use(plain), use(hooked), rec.flush, rounds, steps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)

    from diag.collect.recorder import Recorder

    # Enough rows kept in full that every measured step takes the full path (no sampling).
    rows = 4 * args.rounds * args.steps + 10_000
    gc.disable()  # a collection landing in one half of a round would swamp a microsecond difference
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = {
                "torch nn.Module forward": torch_case(Recorder(f"{tmp}/t", {"gc": False, "table_rows": rows}),
                                                      args.rounds, args.steps),
                "ORT-like run": ort_case(Recorder(f"{tmp}/o", {"gc": False, "table_rows": rows}),
                                         args.rounds, args.steps),
            }
    finally:
        gc.enable()
    print(f"{'case':<26}{'plain µs':>10}{'hooked µs':>11}{'extra µs/step':>15}")
    for name, r in results.items():
        print(f"{name:<26}{r['plain_us']:>10.2f}{r['hooked_us']:>11.2f}{r['extra_us']:>15.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
