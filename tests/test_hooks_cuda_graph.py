"""CUDA-graph replays are steps; torch.compile calls and dynamo's counters are recorded (on CPU, with fakes)."""

from __future__ import annotations

import os
import types

from hooks_support import details, run_target

from diag.store.jsonl import read_jsonl


class FakeEvent:
    clock = 0

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0

    def record(self, stream=None) -> None:
        FakeEvent.clock += 1
        self.t = FakeEvent.clock

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t - self.t) * 0.25  # ms


class FakeGraph:
    """Stands in for torch.cuda.CUDAGraph: what the hooks wrap, and a log of what really ran."""

    log: list[str] = []

    def capture_begin(self, pool=None) -> None:
        FakeCuda.capturing = True

    def capture_end(self) -> None:
        FakeCuda.capturing = False

    def replay(self) -> None:
        FakeGraph.log.append("replay")


class FakeCuda:
    Event = FakeEvent
    CUDAGraph = FakeGraph
    capturing = False

    def is_current_stream_capturing(self) -> bool:
        return FakeCuda.capturing

    def current_device(self) -> int:
        return 0

    def current_stream(self, index: int) -> str:
        return f"stream{index}"

    def is_initialized(self) -> bool:
        return True


class Net:
    """A module whose step describes itself like a batch-4 CUDA model."""


def _describe(mod, args, kwargs):
    return "Ranker", 4, [(4, 64)], "float32", "cuda:0"


def _hooks(tmp_path):
    from diag.collect.hooks.torch import TorchHooks
    from diag.collect.recorder import Recorder

    FakeGraph.log = []

    def compile(model=None, **kwargs):  # noqa: A001 - torch's name
        return model

    # a fresh subclass each time: the hooks patch the class they are given
    cuda = FakeCuda()
    cuda.CUDAGraph = type("CUDAGraph", (FakeGraph,), {})
    torch = types.SimpleNamespace(cuda=cuda, Tensor=object, compile=compile)
    rec = Recorder(str(tmp_path), {"gc": False})
    hooks = TorchHooks(rec, torch)
    hooks.describe = _describe
    hooks._install_graphs()
    return rec, hooks, torch


def _rows(rec, table: str) -> list[dict]:
    rec.flush()
    path = os.path.join(rec.run_dir, "raw", f"{table}.{os.getpid()}.jsonl")
    return read_jsonl(path) if os.path.exists(path) else []


def test_replays_are_numbered_steps_and_nested_replays_are_not(tmp_path) -> None:
    rec, hooks, torch = _hooks(tmp_path)
    net = Net()
    g = torch.cuda.CUDAGraph()
    assert not getattr(rec, "cuda_graphs", False)
    hooks._step(lambda: "warm-up", net, (), {})               # seq 0: an eager warm-up forward
    g.capture_begin()
    hooks._step(lambda: "captured", net, (), {})              # seq 1: recorded into the graph, not GPU-timed
    g.capture_end()
    assert rec.cuda_graphs  # the kernel windows read this to choose CUPTI teardown
    for _ in range(3):
        g.replay()                                            # seq 2..4: outermost replays are steps
    hooks._step(lambda: g.replay(), net, (), {})              # seq 5: a wrapper replaying in forward: one step
    assert hooks.state.depth == 0
    assert FakeGraph.log == ["replay"] * 4                    # the real replay always ran
    hooks.resolve(block=True)
    steps = sorted(_rows(rec, "steps"), key=lambda r: r["seq"])
    assert [(r["seq"], r["source"]) for r in steps] == [
        (0, "torch"), (1, "torch"), (2, "cuda_graph"), (3, "cuda_graph"), (4, "cuda_graph"), (5, "torch")]
    replays = [r for r in steps if r["source"] == "cuda_graph"]
    # named after the model captured into the graph, on the current device, with GPU time
    assert all(r["model"] == "Ranker" and r["batch"] == 4 and r["device"] == "cuda:0" for r in replays)
    assert all(r["gpu_ns"] == 250_000 for r in replays)
    assert steps[1]["gpu_ns"] == -1  # no CUDA event inside a capture

    rec.flush(final=True)
    events = _rows(rec, "events")
    capture = [e for e in events if e["kind"] == "cuda_graph" and e["name"] == "capture"]
    summary = [e for e in events if e["kind"] == "cuda_graph" and e["name"] == "summary"]
    assert len(capture) == 1
    assert len(summary) == 1
    detail = summary[0]["detail"]
    detail = detail if isinstance(detail, dict) else __import__("json").loads(detail)
    assert (detail["captured"], detail["replays"], detail["replay_steps"]) == (1, 4, 3)


def test_unnamed_graph_and_compile_arguments(tmp_path) -> None:
    rec, hooks, torch = _hooks(tmp_path)
    g = torch.cuda.CUDAGraph()   # captured with no module call inside: replays stay "CUDAGraph"
    g.replay()
    assert torch.compile("m", mode="reduce-overhead") == "m"   # the original still runs, result unchanged
    torch.compile("m", backend=len, dynamic=True)
    assert rec.compiled
    hooks.resolve(block=True)
    steps = _rows(rec, "steps")
    assert [(r["source"], r["model"], r["batch"]) for r in steps] == [("cuda_graph", "CUDAGraph", -1)]
    import json

    calls = [json.loads(e["detail"]) if isinstance(e["detail"], str) else e["detail"]
             for e in _rows(rec, "events") if e["kind"] == "compile"]
    assert [(c["mode"], c["backend"], c["dynamic"]) for c in calls] == [
        ("reduce-overhead", "inductor", None), ("default", "len", True)]


def test_dynamo_facts_from_a_stand_in() -> None:
    from diag.collect.hooks.cuda_graph import dynamo_facts

    assert dynamo_facts({}) is None  # dynamo never imported: nothing read, nothing imported
    utils = types.SimpleNamespace(
        counters={"graph_break": {"print\nmore": 2, "item": 1}, "stats": {"unique_graphs": 3}, "frames": {"total": 4}},
        guard_failures={"f": ["size mismatch at index 0"], "g": ["x", "y"]},
        compilation_time_metrics={"_compile.compile_inner": [1.5, 0.5]})
    facts = dynamo_facts({"torch._dynamo.utils": utils})
    assert facts["graph_breaks"] == 3 and facts["graph_break_reasons"] == ["print", "item"]
    assert facts["recompiles"] == 3 and facts["recompile_reasons"][0] == "size mismatch at index 0"
    assert facts["compile_s"] == 2.0 and facts["unique_graphs"] == 3
    broken = types.SimpleNamespace(counters=None)  # another torch's internals: facts lost, no exception
    assert dynamo_facts({"torch._dynamo.utils": broken}) == {}


def test_compiled_program_records_mode_breaks_and_recompiles(tmp_path) -> None:
    code = """
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(4, 4)
                self.b = torch.nn.Linear(4, 4)
            def forward(self, x):
                y = self.a(x)
                print("side effect")          # a graph break
                return self.b(y)
        m = torch.compile(Net(), mode="default", backend="eager")
        for n in (3, 3, 5, 5):                 # a new shape: a recompilation
            m(torch.randn(n, 4))
    """
    run, proc = run_target(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    steps = run.table("steps")
    assert len(steps) == 4 and set(steps["model"]) == {"Net"}  # one step per compiled call, not its parts
    ev = run.table("events")
    calls = [d for d in details(ev, "compile") if "mode" in d]
    assert [(c["mode"], c["backend"]) for c in calls] == [("default", "eager")]
    summary = [d for d in details(ev, "compile") if "graph_breaks" in d]
    assert len(summary) == 1
    assert summary[0]["graph_breaks"] >= 1 and summary[0]["recompiles"] >= 1 and summary[0]["compile_s"] > 0

    from diag.analysis.metrics import compute_metrics

    m = compute_metrics(run)
    assert m["run.compiled"] == 1 and m["run.cuda_graphs"] == 0
    assert m["run.graph_breaks"] >= 1 and m["run.recompiles"] >= 1 and m["coldstart.compile_s"] > 0


def test_no_event_is_queried_or_recorded_while_any_thread_captures(tmp_path) -> None:
    """A global-mode capture is invalidated by an event query from any thread (seen once on the H200:
    the flusher resolving step events while the program captured): resolve() waits for the capture."""
    rec, hooks, torch = _hooks(tmp_path)
    queried: list[int] = []
    done = [False]  # the GPU has not finished the eager step yet
    real_query = FakeEvent.query
    FakeEvent.query = lambda self: bool(queried.append(1)) or done[0]  # type: ignore[method-assign]
    try:
        hooks._step(lambda: "eager", Net(), (), {})  # a GPU-timed step: its events wait in `pending`
        assert len(hooks.pending) == 1
        queried.clear()
        done[0] = True
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        FakeCuda.capturing = False  # the capture is another thread's: this stream is not capturing
        assert rec.capturing == 1
        hooks.resolve()  # the flusher's turn: no query during the capture
        hooks._step(lambda: "eager", Net(), (), {})  # and no event recorded for a step meanwhile
        assert queried == [] and len(hooks.pending) == 1
        g.capture_end()
        assert rec.capturing == 0
        hooks.resolve()
        assert queried and not hooks.pending
    finally:
        FakeEvent.query = real_query  # type: ignore[method-assign]
