"""What does one step (and one NVTX range) cost under diag's hooks, in microseconds?

Times each case plain and hooked, interleaved (plain, hooked, plain, hooked...),
in CPU time of the calling thread (so other processes on a shared box do not
count), and prints the median per-call time of each, the median extra cost per call on
the target's thread, and what the flusher thread then spends per call turning
the rows into JSON (off the target's thread, but it takes the GIL: a
single-threaded target pays it too). Rows are flushed between rounds, outside
the timed region.

Cases:
- torch nn.Module forward: a tiny nested `nn.Module` on the real (CPU) torch;
  the extra cost is one outermost step plus 3 nested module calls.
- ORT-like run: an `InferenceSession.run` on a fake onnxruntime that returns
  at once, so only the hook is measured.
- graph-replay-like step: ranker_graph's loop on fake CUDA (real hook code,
  real `torch.compiler.is_compiling`): two same-device CUDA `copy_` into
  static buffers, `CUDAGraph.replay()`, `.item()` on a CUDA tensor. The fake
  CUDA calls return at once; on a GPU each one costs about 1 to 3 µs more,
  so the case also counts the CUDA API calls the hooks make per step.
- NVTX range: `nvtx.push_range` / `nvtx.pop_range` on the real nvtx package
  (no Nsight attached).

Budgets: BUDGET_US (µs, reported) and BUDGET_CALLS (calls added per call, held:
the command exits with 1 when a case adds more calls than its budget).

    python benchmarks/hooks_cost.py [--rounds 41] [--steps 1000] [--only NAME]

On a GPU machine, `--cuda` measures instead two real loops on the real GPU with
every torch hook installed as `diag profile` installs them (steps with CUDA
events, copies, syncs, CUDA graphs; default sampling, so the rows-per-second
cap is in), plain and hooked rounds interleaved in one process, in wall time
per step (a launch-bound loop waits on the GPU too), the flusher's work per
step added to the hooked side (it takes the GIL the loop needs):
- "cuda eager ranker": ranker_mlp's step (32 blocks, batch 1, `.max().item()`);
- "cuda graph replay": ranker_graph's step (two `copy_` into static inputs,
  `CUDAGraph.replay()`, `.max().item()`).

To compare with another tree: `PYTHONPATH=/path/to/tree python benchmarks/hooks_cost.py`.
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Budgets per call on the target's thread. µs: the extra CPU time a quiet 2-core box should
# show (median of rounds); on a loaded box these figures swell 2-5x, so they are reported, not
# enforced. Calls: the Python and builtin calls the hooks add, which no load can move: these are
# held (exit code 1 past them), and they are what a change to the hot path must not grow.
BUDGET_US = {
    "torch nn.Module forward": 3.0 + 3 * 1.0,  # one outermost step + 3 nested module calls
    "ORT-like run": 3.0,
    "graph-replay-like step": 3.0,            # the replay step + 2 same-device copies + 1 .item() sync
    "NVTX range": 1.0,                        # one push_range/pop_range pair
}
BUDGET_CALLS = {
    "torch nn.Module forward": 26,
    "ORT-like run": 37,
    # was 57 before the per-step cuts (2026-12-01); 38 -> 39 (2026-12-02): a kept sync asks its weight
    # before the call (one call more), so that a sampled-away one reads no clock (three calls fewer)
    "graph-replay-like step": 39,
    "NVTX range": 14,              # was 23
}


CLOCK = time.thread_time_ns  # --cuda: time.perf_counter_ns (a launch-bound step also waits on the GPU)


def _per_call_us(fn: Callable[[], Any], steps: int) -> float:
    # The thread's CPU time, not wall time: on a shared box, time slices given to other
    # processes in the middle of a round would otherwise be counted as the hooks' cost.
    t0 = CLOCK()
    for _ in range(steps):
        fn()
    return (CLOCK() - t0) / steps / 1e3


def _calls_per_call(fn: Callable[[], Any], n: int = 200) -> float:
    """Python and builtin function calls per call of fn: a count the box's load cannot move."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" or event == "c_call":
            count += 1

    sys.setprofile(profile)
    try:
        for _ in range(n):
            fn()
    finally:
        sys.setprofile(None)
    return count / n - 1  # less setprofile(None) itself, spread over n: below 0.01


def interleaved(call: Callable[[], Any], use_plain: Callable[[], None], use_hooked: Callable[[], None],
                flush: Callable[[], None], rounds: int, steps: int) -> dict[str, float]:
    """Median µs per call plain and hooked, of the per-round differences, and of the flush per call;
    and the function calls the hooks add per call."""
    use_plain()
    plain_calls = _calls_per_call(call)
    use_hooked()
    extra_calls = _calls_per_call(call) - plain_calls
    flush()
    plain, hooked, extra, flushed = [], [], [], []
    for _ in range(rounds):
        use_plain()
        p = _per_call_us(call, steps)
        use_hooked()
        h = _per_call_us(call, steps)
        t0 = CLOCK()
        flush()
        flushed.append((CLOCK() - t0) / steps / 1e3)
        plain.append(p)
        hooked.append(h)
        extra.append(h - p)
    return {"plain_us": statistics.median(plain), "hooked_us": statistics.median(hooked),
            "extra_us": statistics.median(extra), "flush_us": statistics.median(flushed), "calls": extra_calls}


def _swapper(patched: list[tuple[Any, str]]) -> tuple[Callable[[], None], Callable[[], None]]:
    """(use_plain, use_hooked) for hooked attributes whose originals are in `__wrapped__`."""
    hooked = [(owner, name, getattr(owner, name)) for owner, name in patched]

    def use_plain() -> None:
        for owner, name, fn in hooked:
            setattr(owner, name, fn.__wrapped__)

    def use_hooked() -> None:
        for owner, name, fn in hooked:
            setattr(owner, name, fn)

    return use_plain, use_hooked


def torch_case(rec: Any, rounds: int, steps: int) -> dict[str, float]:
    import torch

    from diag.collect.hooks import torch as torch_hooks

    torch_hooks.install(rec, torch)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)).eval()
    x = torch.randn(2, 4)
    use_plain, use_hooked = _swapper([(torch.nn.Module, "__call__")])
    with torch.inference_mode():
        for _ in range(200):  # warm up
            model(x)
        try:
            return interleaved(lambda: model(x), use_plain, use_hooked, rec.flush, rounds, steps)
        finally:
            use_hooked()


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
    sess = ort.InferenceSession(b"model", providers=["CPUExecutionProvider"])
    feed = {"X": np.ones((5, 4), dtype=np.float32)}
    use_plain, use_hooked = _swapper([(ort.InferenceSession, "run")])
    for _ in range(200):
        sess.run(None, feed)
    return interleaved(lambda: sess.run(None, feed), use_plain, use_hooked, rec.flush, rounds, steps)


# -- fake CUDA for the graph-replay case: each call returns at once and is counted ---------------

CUDA_CALLS: collections.Counter[str] = collections.Counter()


class _FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        CUDA_CALLS["Event()"] += 1

    def record(self, stream: Any = None) -> None:
        CUDA_CALLS["Event.record"] += 1

    def query(self) -> bool:
        CUDA_CALLS["Event.query"] += 1
        return True

    def synchronize(self) -> None:
        CUDA_CALLS["Event.synchronize"] += 1

    def elapsed_time(self, end: Any) -> float:
        CUDA_CALLS["Event.elapsed_time"] += 1
        return 0.1


class _FakeStream:
    def synchronize(self) -> None:
        pass


class _FakeGraph:
    def capture_begin(self, pool: Any = None) -> None:
        _FakeCuda.capturing = True

    def capture_end(self) -> None:
        _FakeCuda.capturing = False

    def replay(self) -> None:
        pass


class _FakeCuda:
    Event = _FakeEvent
    Stream = _FakeStream
    CUDAGraph = _FakeGraph
    capturing = False
    _stream = _FakeStream()

    def is_current_stream_capturing(self) -> bool:
        CUDA_CALLS["is_current_stream_capturing"] += 1
        return _FakeCuda.capturing

    def current_device(self) -> int:
        CUDA_CALLS["current_device"] += 1
        return 0

    def current_stream(self, device: Any = None) -> Any:
        CUDA_CALLS["current_stream"] += 1
        return self._stream

    def is_initialized(self) -> bool:
        return True

    def synchronize(self, device: Any = None) -> None:
        pass


class _FakeCudaTensor:
    """A CUDA tensor of shape (1, 64): device tests, an in-place copy and a scalar read."""

    is_cuda = True
    is_cpu = False
    shape = (1, 64)
    dtype = "float32"

    def get_device(self) -> int:
        return 0

    def copy_(self, src: Any, non_blocking: bool = False) -> Any:
        return self

    def item(self) -> float:
        return 0.0

    def tolist(self) -> list[float]:
        return [0.0]

    def to(self, *args: Any, **kwargs: Any) -> Any:
        return self

    cuda = cpu = to


class _Ranker:
    """What the graph's capture ran: a module step (named Ranker, batch 1)."""

    def parameters(self) -> Any:
        return iter(())


def graph_case(rec: Any, rounds: int, steps: int) -> dict[str, float]:
    import torch

    from diag.collect.hooks.torch import TorchHooks

    cuda = _FakeCuda()
    cuda.CUDAGraph = type("CUDAGraph", (_FakeGraph,), {})  # a class of its own: the hooks patch it
    Tensor = type("Tensor", (_FakeCudaTensor,), {})
    fake = types.SimpleNamespace(cuda=cuda, Tensor=Tensor, compile=lambda m=None, **kw: m,
                                 compiler=torch.compiler, _dynamo=getattr(torch, "_dynamo", None))
    hooks = TorchHooks(rec, fake)
    hooks._install_copies()
    hooks._install_syncs()
    hooks._install_graphs()
    rec.flush_hooks.append(lambda final: hooks.resolve(block=final))

    graph = cuda.CUDAGraph()
    static_user, static_item, user, item, out = Tensor(), Tensor(), Tensor(), Tensor(), Tensor()
    graph.capture_begin()
    hooks._step(lambda *a: out, _Ranker(), (static_user, static_item), {})  # the forward captured
    graph.capture_end()

    def step() -> float:
        static_user.copy_(user)
        static_item.copy_(item)
        graph.replay()
        return out.item()

    use_plain, use_hooked = _swapper([(Tensor, "copy_"), (Tensor, "item"), (cuda.CUDAGraph, "replay")])
    for _ in range(200):
        step()
    CUDA_CALLS.clear()
    before = hooks.graphs.replay_steps
    result = interleaved(step, use_plain, use_hooked, rec.flush, rounds, steps)
    n = hooks.graphs.replay_steps - before
    result["cuda_calls"] = {k: v / n for k, v in sorted(CUDA_CALLS.items())}
    return result


def nvtx_case(rec: Any, rounds: int, steps: int) -> dict[str, float]:
    import nvtx

    from diag.collect.hooks import nvtx as nvtx_hooks

    nvtx_hooks.install(rec, nvtx)
    use_plain, use_hooked = _swapper([(nvtx, "push_range"), (nvtx, "pop_range")])

    def one_range() -> None:
        nvtx.push_range("preprocess")
        nvtx.pop_range()

    return interleaved(one_range, use_plain, use_hooked, rec.flush, rounds, steps)


# -- real CUDA (--cuda) ----------------------------------------------------------------------------

def _patched_by(install: Callable[[], Any], owners: list[Any]) -> list[tuple[Any, str]]:
    """Run `install` and return the (owner, name) attributes it replaced with a `__wrapped__` wrapper."""
    before = {(id(o), n): v for o in owners for n, v in vars(o).items()}
    install()
    return [(o, n) for o in owners for n, v in list(vars(o).items())
            if hasattr(v, "__wrapped__") and before.get((id(o), n)) is not v]


def _cuda_setup(rec: Any) -> tuple[Any, Any, Callable[[], None], Callable[[], None]]:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sample_workloads"))
    import _ranker

    from diag.collect.hooks import torch as torch_hooks

    owners = [torch.nn.Module, torch.Tensor, torch.cuda, torch.cuda.Event, torch.cuda.Stream, torch.cuda.CUDAGraph]
    hooks: list[Any] = []
    patched = _patched_by(lambda: hooks.append(torch_hooks.install(rec, torch)), owners)
    rec.flush_hooks.append(lambda final: hooks[0].resolve(block=final))
    args = argparse.Namespace(large=False, width=64, blocks=32, batch=1, device="cuda")
    use_plain, use_hooked = _swapper(patched)
    use_plain()
    model, users, items = _ranker.build(args)
    use_hooked()
    return torch, (model, users, items), use_plain, use_hooked


def cuda_eager_case(rec: Any, rounds: int, steps: int) -> dict[str, Any]:
    torch, (model, users, items), use_plain, use_hooked = _cuda_setup(rec)
    k = [0]

    def step() -> float:
        k[0] = (k[0] + 1) % 256
        return model(users[k[0]], items[k[0]]).max().item()

    with torch.inference_mode():
        for _ in range(200):
            step()
        return interleaved(step, use_plain, use_hooked, rec.flush, rounds, steps)


def cuda_graph_case(rec: Any, rounds: int, steps: int) -> dict[str, Any]:
    torch, (model, users, items), use_plain, use_hooked = _cuda_setup(rec)
    from ranker_graph import graphed_step  # sample_workloads/, on sys.path since _cuda_setup

    with torch.inference_mode():
        replay = graphed_step(model, users, items)
        k = [0]

        def step() -> float:
            k[0] = (k[0] + 1) % 256
            return replay(k[0]).max().item()

        for _ in range(200):
            step()
        return interleaved(step, use_plain, use_hooked, rec.flush, rounds, steps)


CUDA_CASES: dict[str, Callable[[Any, int, int], dict[str, Any]]] = {
    "cuda eager ranker": cuda_eager_case,
    "cuda graph replay": cuda_graph_case,
}
BUDGET_US.update({"cuda eager ranker": 3.0, "cuda graph replay": 3.0})

CASES: dict[str, Callable[[Any, int, int], dict[str, Any]]] = {
    "torch nn.Module forward": torch_case,
    "ORT-like run": ort_case,
    "graph-replay-like step": graph_case,
    "NVTX range": nvtx_case,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--only", action="append", choices=list(CASES) + list(CUDA_CASES),
                        help="run this case (repeatable)")
    parser.add_argument("--cuda", action="store_true", help="the real-GPU cases instead (module doc)")
    args = parser.parse_args(argv)
    global CLOCK
    cases = CUDA_CASES if args.cuda else CASES
    if args.cuda:
        CLOCK = time.perf_counter_ns

    from diag.collect.recorder import Recorder

    # Enough rows kept in full that every measured call takes the full path (no sampling).
    rows = 4 * args.rounds * args.steps + 10_000
    results: dict[str, dict[str, Any]] = {}
    gc.disable()  # a collection landing in one half of a round would swamp a microsecond difference
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, name in enumerate(args.only or cases):
                # --cuda: diag's defaults (sampling and the rate cap included), in-process kernel windows off
                options = {"gc": False, "kernel_windows": 0} if args.cuda else {"gc": False, "table_rows": rows}
                rec = Recorder(f"{tmp}/{i}", options)
                try:
                    results[name] = {**CASES, **CUDA_CASES}[name](rec, args.rounds, args.steps)
                except ImportError as exc:
                    print(f"{name}: skipped ({exc})")
    finally:
        gc.enable()
    print(f"{'case':<26}{'plain µs':>10}{'hooked µs':>11}{'extra µs':>10}{'budget':>8}{'flush µs':>10}"
          f"{'+calls':>8}{'budget':>8}")
    over = []
    for name, r in results.items():
        slow = "" if r["extra_us"] <= BUDGET_US[name] else "  (µs over: a loaded box?)"
        calls = "" if r["calls"] <= BUDGET_CALLS.get(name, r["calls"]) + 0.5 else "  CALLS OVER"
        if calls:
            over.append(name)
        print(f"{name:<26}{r['plain_us']:>10.2f}{r['hooked_us']:>11.2f}{r['extra_us']:>10.2f}"
              f"{BUDGET_US[name]:>8.1f}{r['flush_us']:>10.2f}{r['calls']:>8.1f}{BUDGET_CALLS.get(name, 0):>8d}{calls}{slow}")
        if "cuda_calls" in r:
            cuda = ", ".join(f"{k} {v:.2f}" for k, v in r["cuda_calls"].items()) or "none"
            print(f"{'':<4}CUDA API calls per step: {cuda}")
    print("extra: the target thread's CPU µs per call (median of per-round differences); flush: the "
          "flusher's JSON work per call; +calls: Python and builtin calls the hooks add per call")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
