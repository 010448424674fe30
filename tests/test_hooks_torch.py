"""torch hooks, through a real target process: steps, copies, syncs, torch.load, torch.cuda.nvtx."""

from __future__ import annotations

import json

import pytest
import torch
from hooks_support import details, run_target

TARGET = """
import gc, os, threading, torch, diag

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU()
    def forward(self, x, mask=None):
        y = self.act(self.lin(x))
        y.sum().item()                    # a CPU item(): not a sync
        if SYNC_IN_STEP:
            try:
                torch.cuda.synchronize()  # raises on a CPU build; still a synchronizing call
            except Exception:
                pass
        return y if mask is None else y * mask

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = torch.nn.Sequential(Block(), torch.nn.Linear(4, 2))
    def forward(self, x, mask=None):
        return self.b(self.a(x, mask=mask))

SYNC_IN_STEP = False
net = Net().eval()
with torch.no_grad():
    for _ in range(5):
        net(torch.randn(3, 4))
    net(torch.randn(7, 4, dtype=torch.float32), mask=torch.ones(7, 4))
    SYNC_IN_STEP = True
    net(torch.randn(2, 4))
    SYNC_IN_STEP = False
    t = threading.Thread(target=lambda: net(torch.randn(9, 4)))
    t.start(); t.join()

path = os.path.join(os.getcwd(), "weights.pt")
torch.save(net.state_dict(), path)
net.load_state_dict(torch.load(path))

x = torch.randn(16, 4)
x.to(torch.float64); x.to("cpu"); x.cpu(); torch.empty(16, 4).copy_(x)   # no cross-device copy
if torch.cuda.is_available():
    g = x.cuda()
    x.pin_memory().to("cuda", non_blocking=True)
    g.cpu(); g.sum().item(); torch.empty(16, 4).copy_(g)
    torch.cuda.synchronize()

class FakeNvtx:                              # stands in for CUDA's libnvtx on a CPU build
    calls = []
    def rangePushA(self, m): self.calls.append(("push", m)); return 0
    def rangePop(self): self.calls.append(("pop",)); return 0
    def rangeStartA(self, m): self.calls.append(("start", m)); return 42
    def rangeEnd(self, i): self.calls.append(("end", i))
    def markA(self, m): self.calls.append(("mark", m))
if not torch.cuda.is_available():
    torch.cuda.nvtx._nvtx = FakeNvtx()
tn = torch.cuda.nvtx
tn.range_push("request"); tn.range_push("inner"); tn.range_pop(); tn.range_pop()
with tn.range("ctx_{}", 1):
    pass
rid = tn.range_start("started"); tn.range_end(rid)
tn.mark("here")
with diag.request():
    with diag.stage("preprocess"):
        pass
gc.collect()
if not torch.cuda.is_available():
    print("NVTX", FakeNvtx.calls)
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torch_target")
    run, proc = run_target(tmp, TARGET)
    assert proc.returncode == 0, proc.stderr
    return run, proc


def test_steps_are_outermost_module_calls(recorded) -> None:
    run, _ = recorded
    steps = run.table("steps")
    assert list(steps["model"]) == ["Net"] * 8  # Block/Sequential/Linear inside are not steps
    assert list(steps["batch"]) == [3, 3, 3, 3, 3, 7, 2, 9]
    assert list(steps["seq"]) == list(range(8))
    assert steps["shapes"].iloc[0] == "[[3,4]]"
    assert steps["shapes"].iloc[5] == "[[7,4],[7,4]]"  # keyword tensor inputs count too
    assert set(steps["dtype"]) == {"float32"} and set(steps["device"]) == {"cpu"}
    assert (steps["dur_ns"] > 0).all() and (steps["gpu_ns"] == -1).all()
    assert (steps["weight"] == 1).all() and not steps["in_window"].any()
    assert steps["tid"].nunique() == 2  # the step run on another thread is a step of its own
    assert list(steps["syncs"]) == [0, 0, 0, 0, 0, 0, 2, 0]  # two Blocks synchronize in step 6


def test_syncs(recorded) -> None:
    run, _ = recorded
    syncs = run.table("syncs")
    cpu = syncs[syncs["api"] == "torch.cuda.synchronize"]
    assert len(cpu) >= 1 and bool(cpu["in_step"].iloc[0])
    assert "Tensor.item" not in set(syncs["api"]) or torch.cuda.is_available()  # CPU item() is no sync


def test_events(recorded) -> None:
    run, _ = recorded
    ev = run.table("events")
    kinds = set(ev["kind"])
    assert {"process_start", "import", "first_step", "model_load", "gc"} <= kinds
    (imp,) = details(ev, "import")
    assert imp["version"] == torch.__version__
    assert ev[ev["kind"] == "import"]["dur_ns"].iloc[0] > 10**6
    (load,) = details(ev, "model_load")
    assert load["file"].endswith("weights.pt") and load["bytes"] > 0
    assert ev[ev["kind"] == "first_step"]["name"].iloc[0] == "Net"
    gens = {d["generation"] for d in details(ev, "gc")}
    assert 2 in gens  # the explicit gc.collect()
    # no hook failed; the kernel windows (on by default) may say why they cannot run on this build
    notes = ev[(ev["kind"] == "note") & (ev["name"] != "kernel_windows")]
    assert notes.empty, list(notes["detail"])


def test_meta(recorded) -> None:
    run, _ = recorded
    import glob
    import os

    from diag.store.jsonl import read_jsonl

    rows = [r for p in glob.glob(os.path.join(run.path, "raw", "meta.*.jsonl")) for r in read_jsonl(p)]
    merged: dict = {}
    for r in rows:
        merged.update(r)
    assert merged["torch"] == torch.__version__ and merged["python"]
    assert "cuda_runtime" in merged


def test_copies(recorded) -> None:
    run, _ = recorded
    copies = run.table("copies")
    if not torch.cuda.is_available():
        assert copies.empty  # same-device .to/.cpu/.copy_ are not copies
        pytest.skip("no CUDA device: cross-device copies cannot happen here")
    h2d = copies[copies["direction"] == "h2d"]
    assert set(h2d["pinned"]) == {True, False}
    assert bool(h2d[h2d["pinned"] == True]["non_blocking"].iloc[0])  # noqa: E712
    assert (copies["bytes"] == 16 * 4 * 4).all()
    assert {"d2h"} <= set(copies["direction"])
    syncs = set(run.table("syncs")["api"])
    assert {"Tensor.cpu", "Tensor.item", "Tensor.copy_", "torch.cuda.synchronize"} <= syncs


def test_torch_cuda_nvtx_recorded_and_passed_on(recorded) -> None:
    run, proc = recorded
    ranges = run.table("ranges")
    tn = ranges[ranges["source"] == "torch.cuda.nvtx"]
    by_name = {r["name"]: r for _, r in tn.iterrows()}
    assert set(by_name) == {"request", "inner", "ctx_1", "started"}
    assert by_name["request"]["kind"] == "request" and by_name["inner"]["kind"] == "stage"
    assert by_name["request"]["depth"] == 0 and by_name["inner"]["depth"] == 1
    diag_ranges = ranges[ranges["source"] == "diag"]
    assert sorted(diag_ranges["name"]) == ["preprocess", "request"]
    ev = run.table("events")
    assert "here" in set(ev[ev["kind"] == "mark"]["name"])
    if not torch.cuda.is_available():
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("NVTX"))
        calls = line[len("NVTX "):]
        for expected in ("('push', 'request')", "('push', 'ctx_1')", "('start', 'started')", "('end', 42)",
                         "('mark', 'here')"):
            assert expected in calls
        assert calls.count("('pop',)") == 3


def test_sigkilled_target_leaves_readable_rows(tmp_path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from hooks_support import make_run_dir, target_env, write_script

    from diag.store.run import open_run

    run_dir = make_run_dir(tmp_path)
    script = write_script(tmp_path, """
        import sys, torch
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        n = 0
        while True:
            m(torch.randn(2, 8)); n += 1
            if n == 50:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, str(script)], env=target_env(run_dir, {"flush_s": 0.1}),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.6)  # a few flush intervals
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    steps = open_run(str(run_dir)).table("steps")
    assert len(steps) >= 50 and list(steps["seq"][:50]) == list(range(50))
    assert json.loads(open_run(str(run_dir)).table("events")["detail"].iloc[0]) is not None


# -- CUDA code paths with fakes (the GPU runs happen elsewhere) -------------------------------


class FakeTensor:
    def __init__(self, device: int | None, pinned: bool = False, n: int = 10) -> None:
        self.device_index, self.pinned, self.n = device, pinned, n
        self.is_cuda = device is not None

    def get_device(self) -> int:
        return -1 if self.device_index is None else self.device_index

    def is_pinned(self) -> bool:
        return self.pinned

    def nelement(self) -> int:
        return self.n

    def element_size(self) -> int:
        return 4


class FakeEvent:
    clock = 0

    def __init__(self, enable_timing: bool = False) -> None:
        self.done, self.t, self.stream, self.synced = False, None, None, 0

    def record(self, stream=None) -> None:
        FakeEvent.clock += 1
        self.t, self.stream = FakeEvent.clock, stream

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.synced += 1
        self.done = True

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.t - self.t) * 0.5  # ms


class FakeCuda:
    Event = FakeEvent
    capturing = False

    def is_current_stream_capturing(self) -> bool:
        return self.capturing

    def current_device(self) -> int:
        return 0

    def current_stream(self, index: int) -> str:
        return f"stream{index}"

    def is_initialized(self) -> bool:
        return True


def _fake_hooks(tmp_path, **options):
    import types

    from diag.collect.hooks.torch import TorchHooks
    from diag.collect.recorder import Recorder

    rec = Recorder(str(tmp_path), {"gc": False, **options})
    fake_torch = types.SimpleNamespace(cuda=FakeCuda(), Tensor=FakeTensor)
    return rec, TorchHooks(rec, fake_torch)


def _rows(rec, table: str) -> list[dict]:
    import os

    from diag.store.jsonl import read_jsonl

    rec.flush()
    path = os.path.join(rec.run_dir, "raw", f"{table}.{os.getpid()}.jsonl")
    return read_jsonl(path) if os.path.exists(path) else []


def test_cuda_event_schedule_and_resolution(tmp_path) -> None:
    rec, hooks = _fake_hooks(tmp_path, cuda_event_all=2, cuda_event_every=3)
    timed = [hooks._start_events(1) is not None for _ in range(7)]
    assert timed == [True, True, False, True, False, False, True]
    hooks.torch.cuda.capturing = True
    assert hooks._start_events(0) is None  # never inside a CUDA graph capture
    hooks.torch.cuda.capturing = False

    rec2, hooks = _fake_hooks(tmp_path / "b")
    ends = []
    for _ in range(3):
        events = hooks._start_events(0)
        assert events[2] == "stream0"
        row = rec2.begin_step("torch", lambda mod, args, kwargs: ("M", 2, [(2, 4)], "float32", "cuda:0"))
        rec2.end_step(row, hooks._await_gpu, events)  # the row waits for its end event
        ends.append(events[1])
    assert _rows(rec2, "steps") == []  # nothing completed: rows wait, nobody blocks
    ends[0].done = True
    hooks.resolve()
    assert [r["seq"] for r in _rows(rec2, "steps")] == [0]
    ends[1].done = ends[2].done = True
    hooks.resolve(block=True)  # at exit: waits (polling, bounded: tests/test_multi_rank_exit.py) for the rest
    rows = _rows(rec2, "steps")
    assert [r["seq"] for r in rows] == [0, 1, 2] and all(r["gpu_ns"] == 500_000 for r in rows)
    assert not any(e.synced for e in ends)  # never a blocking synchronize
    assert sum(len(v) for v in hooks.free_events.values()) == 3  # pairs are reused
    assert _rows(rec2, "syncs") == []  # diag's own waits are not the program's syncs


def test_fast_loops_time_fewer_steps_with_cuda_events(tmp_path, monkeypatch) -> None:
    from diag.collect.hooks import torch as torch_hooks

    clock = [0]
    monkeypatch.setattr(torch_hooks, "_perf_ns", lambda: clock[0])
    _, hooks = _fake_hooks(tmp_path, cuda_event_all=0, cuda_event_every=4)
    timed = 0
    for _ in range(20_000):  # 4000 steps a second: 250 µs each
        clock[0] += 250_000
        timed += hooks._start_events(0) is not None
    assert hooks.event_every == 4000 // torch_hooks.MAX_TIMED_PER_S
    assert timed < 20_000 / 10  # not 1 in 4 any more
    for _ in range(5_000):  # slower steps (5 ms): back to the base schedule
        clock[0] += 5_000_000
        hooks._start_events(0)
    assert hooks.event_every == 4


class GpuNet:
    """A module on cuda:0 called without tensor inputs: the step's device comes from its parameters."""

    def parameters(self):
        yield FakeTensor(0)


def test_cuda_steps_go_through_the_recorder_lifecycle(tmp_path) -> None:
    rec, hooks = _fake_hooks(tmp_path)
    net = GpuNet()

    def forward():
        hooks._step(lambda: None, net, (), {})  # a nested call: part of this step, not a step
        return "out"

    assert [hooks._step(forward, net, (), {}) for _ in range(3)] == ["out"] * 3
    assert hooks.state.depth == 0
    for _, _, end, _ in hooks.pending:
        end.done = True
    hooks.resolve(block=True)
    rows = _rows(rec, "steps")
    assert [r["seq"] for r in rows] == [0, 1, 2]
    assert all(r["device"] == "cuda:0" and r["model"] == "GpuNet" and r["gpu_ns"] == 500_000 for r in rows)
    first = [e for e in _rows(rec, "events") if e["kind"] == "first_step"]
    assert len(first) == 1 and first[0]["name"] == "GpuNet"


def test_copy_directions(tmp_path) -> None:
    rec, hooks = _fake_hooks(tmp_path)
    host, pinned, gpu0, gpu1 = FakeTensor(None), FakeTensor(None, pinned=True), FakeTensor(0), FakeTensor(1)
    hooks._copy("to", host, host, (), {"non_blocking": False}, 0)           # no device change: nothing
    hooks._copy("to", gpu0, FakeTensor(0), (), {"non_blocking": False}, 0)  # same GPU: nothing
    hooks._copy("to", host, gpu0, (), {"non_blocking": False}, 0)
    hooks._copy("cuda", pinned, gpu0, (), {"non_blocking": True}, 0)
    hooks.state.depth = 1
    hooks._copy("cpu", gpu0, host, (), {"non_blocking": False}, 0)          # blocking d2h inside a step: also a sync
    hooks.state.depth = 0
    hooks._copy("copy_", gpu0, gpu1, (), {"non_blocking": True}, 0)
    hooks._copy("to", gpu0, pinned, (), {"non_blocking": True}, 0)          # non-blocking d2h into pinned memory: no sync
    rows = [(r["api"], r["direction"], r["pinned"], r["non_blocking"], r["in_step"], r["bytes"])
            for r in _rows(rec, "copies")]
    assert rows == [("to", "h2d", False, False, False, 40), ("cuda", "h2d", True, True, False, 40),
                    ("cpu", "d2h", False, False, True, 40), ("copy_", "d2d", None, True, False, 40),
                    ("to", "d2h", True, True, False, 40)]
    syncs = _rows(rec, "syncs")
    assert [(s["api"], s["in_step"]) for s in syncs] == [("Tensor.cpu", True)]
    assert hooks.state.syncs == 1


def test_non_blocking_argument_forms() -> None:
    from diag.collect.hooks.torch import _non_blocking

    assert _non_blocking(("cuda",), {"non_blocking": True})
    assert _non_blocking(("cuda", None, True), {})       # to(device, dtype, non_blocking)
    assert _non_blocking((0, True), {})                  # cuda(device, non_blocking)
    assert not _non_blocking(("cuda",), {})


def test_compiled_and_traced_models(tmp_path) -> None:
    # One target for every compiled case: importing dynamo is most of the time.
    code = """
        import torch, torch._dynamo, torch._dynamo.utils as u
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(8, 8)
                self.b = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
            def forward(self, x):
                x = x.to(torch.float32)
                y = torch.empty_like(x)
                y.copy_(x)
                return self.b(self.a(y))
        cm2 = torch.compile(M(), backend="eager")
        for _ in range(3):
            cm2(torch.randn(2, 8, dtype=torch.float64))
        print("BREAKS", sum(u.counters["graph_break"].values()))
        m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(8, 2)))
        cm = torch.compile(m, backend="eager")
        for _ in range(2):
            cm(torch.randn(3, 4))
        explain = torch._dynamo.explain(lambda x: m(x) * 2)(torch.randn(3, 4))
        print("breaks", explain.graph_break_count)
        traced = torch.jit.trace(m, torch.randn(5, 4))   # tracing runs are not steps
        traced(torch.randn(5, 4))
    """
    run, proc = run_target(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    # diag's hooks (module call, .to, copy_) cost dynamo no graph break
    assert "BREAKS 0" in proc.stdout and "breaks 0" in proc.stdout, proc.stderr[-2000:]
    assert "TracerWarning" not in proc.stderr
    models = list(run.table("steps")["model"])
    shapes = list(run.table("steps")["shapes"])
    assert models[:3] == ["M"] * 3  # one step per compiled call, named after the compiled model
    assert models[3:5] == ["Sequential", "Sequential"]
    assert models[-1] == "TopLevelTracedModule" and shapes[-1] == "[[5,4]]"
    assert len(models) == 7  # 3 + 2 compiled calls, explain's one eager call, the traced call


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_steps_get_gpu_time_and_cost_little(tmp_path) -> None:
    """On a GPU: gpu_ns from events without blocking; hooked/plain throughput printed and checked."""
    code = """
        import time, torch
        from diag.collect.recorder import active_recorder
        m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU())
                                  for _ in range(8)]).cuda().eval()
        x = torch.randn(64, 1024, device="cuda")
        hooked = torch.nn.Module.__call__
        plain = hooked.__wrapped__
        def rate(n=300):
            torch.cuda.synchronize(); t = time.perf_counter()
            for _ in range(n):
                m(x)
            torch.cuda.synchronize()
            return n / (time.perf_counter() - t)
        with torch.inference_mode():
            for _ in range(100):
                m(x)
            res = {"plain": [], "hooked": []}
            for _ in range(5):
                for name, fn in (("plain", plain), ("hooked", hooked)):
                    torch.nn.Module.__call__ = fn
                    res[name].append(rate())
        torch.nn.Module.__call__ = hooked
        print("ratio", max(res["hooked"]) / max(res["plain"]))
    """
    run, proc = run_target(tmp_path, code, options={"cuda_event_all": 64, "cuda_event_every": 4})
    assert proc.returncode == 0, proc.stderr
    ratio = float(proc.stdout.split()[-1])
    print(f"GPU hooked/plain throughput: {ratio:.4f}")
    assert ratio >= 0.97
    steps = run.table("steps")
    assert set(steps["device"]) == {"cuda:0"}
    timed = steps[steps["gpu_ns"] > 0]
    assert len(timed) >= 64 and (timed["seq"].iloc[:64] == range(64)).all()
    late = steps[steps["seq"] >= 64]
    assert ((late["gpu_ns"] > 0) == (late["seq"] % 4 == 0)).all()
    assert (timed["gpu_ns"] < timed["dur_ns"] * 50).all()


def test_hooks_step_aside_while_dynamo_traces() -> None:
    """Every torch wrapper asks torch's own 'is dynamo tracing?' probe, so tracing adds no graph break."""
    import types

    from diag.collect.hooks.torch import compiling_probe

    assert compiling_probe(torch) is torch.compiler.is_compiling
    old = types.SimpleNamespace(_dynamo=types.SimpleNamespace(is_compiling=lambda: True))
    assert compiling_probe(old)() is True  # torch before 2.3
    assert compiling_probe(types.SimpleNamespace())() is False  # no dynamo at all
