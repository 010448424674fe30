"""Kernel-window backends on CPU: a fake `cupti` module and a fake torch.profiler.

What is checked: the backend chosen (cupti when importable, torch otherwise,
the user's override), TEARDOWN_CUPTI written before every Kineto stop and a
value diag did not write respected, CUDA graphs on an old CUDA turning
teardown off, no profiler call while a stream captures, the cupti trace
parsed by diag/store/kineto.py into the same rows as a torch window, and the
choice as run.json reports it.
"""

from __future__ import annotations

import enum
import importlib.machinery
import json
import os
import sys
import time
import types
from typing import Any

import pytest
from test_kernel_windows import FakeProfiler, FakeRecorder, run_steps

from diag.collect import cupti_backend as cb
from diag.collect import kernel_windows as kw
from diag.collect.kernel_windows import KernelWindows, TeardownEnv, WindowScheduler
from diag.store.kineto import load_trace, parse_trace

CUPTI_OFFSET_NS = 1_000_000_000_000  # the fake CUPTI clock runs this far behind the wall clock


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    RUNTIME = 5
    CONCURRENT_KERNEL = 10


class ActivityMemcpyKind(enum.IntEnum):
    UNKNOWN = 0
    HTOD = 1
    DTOH = 2
    DTOD = 8


class ActivityMemoryKind(enum.IntEnum):
    UNKNOWN = 0
    PAGEABLE = 1
    PINNED = 2
    DEVICE = 3


class FakeCupti:
    """The part of `cupti.cupti` the backend uses; a flush hands the queued records to the callback."""

    ActivityKind = ActivityKind
    ActivityMemcpyKind = ActivityMemcpyKind
    ActivityMemoryKind = ActivityMemoryKind

    def __init__(self, records: list[Any]) -> None:
        self.records = records
        self.calls: list[str] = []
        self.enabled: set[int] = set()
        self.completed: Any = None

    def get_timestamp(self) -> int:
        return time.time_ns() - CUPTI_OFFSET_NS

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        assert requested() == (cb.BUFFER_BYTES, 0)
        self.completed = completed
        self.calls.append("register")

    def activity_enable(self, kind: int) -> None:
        self.enabled.add(int(kind))
        self.calls.append(f"enable {ActivityKind(kind).name}")

    def activity_disable(self, kind: int) -> None:
        self.enabled.discard(int(kind))
        self.calls.append(f"disable {ActivityKind(kind).name}")

    def activity_flush_all(self, flag: int) -> None:
        self.calls.append(f"flush {flag}")
        self.completed(list(self.records))

    def finalize(self) -> None:
        self.calls.append("finalize")


def record(kind: int, **fields: Any) -> types.SimpleNamespace:
    return types.SimpleNamespace(kind=int(kind), **fields)


T0 = time.time_ns() - CUPTI_OFFSET_NS  # CUPTI time of the first activity


def activity() -> list[Any]:
    """A window's worth of GPU activity, as CUPTI records (and a runtime record to ignore)."""
    return [
        record(ActivityKind.MEMCPY, start=T0, end=T0 + 5_000, device_id=0, stream_id=7, correlation_id=1,
               copy_kind=1, src_kind=1, dst_kind=3, bytes=4096),
        record(ActivityKind.CONCURRENT_KERNEL, name="_Z10add_kernelPfS_", start=T0 + 8_000, end=T0 + 10_500,
               device_id=0, stream_id=7, correlation_id=2, grid_x=4, grid_y=1, grid_z=1, block_x=128,
               block_y=1, block_z=1, registers_per_thread=16),
        record(ActivityKind.CONCURRENT_KERNEL, name="triton_poi_fused_gelu_0", start=T0 + 12_000,
               end=T0 + 13_250, device_id=0, stream_id=7, correlation_id=3, grid_x=1, grid_y=1, grid_z=1,
               block_x=256, block_y=1, block_z=1),
        record(ActivityKind.MEMSET, start=T0 + 14_000, end=T0 + 14_400, device_id=0, stream_id=7,
               correlation_id=4, memory_kind=3, bytes=64),
        record(ActivityKind.MEMCPY, start=T0 + 20_000, end=T0 + 27_000, device_id=0, stream_id=7,
               correlation_id=5, copy_kind=2, src_kind=3, dst_kind=2, bytes=8192),
        record(ActivityKind.RUNTIME, start=T0, end=T0 + 1, cbid=211),
    ]


def torch_window_trace() -> dict[str, Any]:
    """The same activity as torch.profiler (Kineto) writes it: µs after its base time."""
    base = (T0 + CUPTI_OFFSET_NS) // 1000 * 1000 - 10_000_000
    rel = (T0 + CUPTI_OFFSET_NS - base) / 1000

    def ev(cat: str, name: str, start_us: float, dur_us: float, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 7, "ts": rel + start_us, "dur": dur_us,
                "args": {"device": 0, "stream": 7, **args}}

    return {"baseTimeNanoseconds": base, "traceEvents": [
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 0, 5.0, bytes=4096),
        ev("kernel", "add_kernel(float*, float*)", 8.0, 2.5, grid=[4, 1, 1], block=[128, 1, 1]),
        ev("kernel", "triton_poi_fused_gelu_0", 12.0, 1.25, grid=[1, 1, 1], block=[256, 1, 1]),
        ev("gpu_memset", "Memset (Device)", 14.0, 0.4, bytes=64),
        ev("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 20.0, 7.0, bytes=8192),
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": rel, "dur": 3.0},
    ]}


@pytest.fixture
def fake_cupti(monkeypatch) -> FakeCupti:  # noqa: ANN001
    """`from cupti import cupti` finds the fake, and find_spec says it is installed."""
    api = FakeCupti(activity())
    pkg = types.ModuleType("cupti")
    pkg.__spec__ = importlib.machinery.ModuleSpec("cupti", None)
    pkg.cupti = api  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    return api


def make(tmp_path, backend: Any = None, env: dict[str, str] | None = None, graphs: bool = False,  # noqa: ANN001
         cuda: str = "13.0", capturing: Any = None, **sched: Any) -> tuple[FakeRecorder, KernelWindows]:
    rec = FakeRecorder(str(tmp_path))
    clock = iter(float(i) for i in range(10_000))
    s = WindowScheduler(installed_at=0.0, **{"windows": 2, "steps": 2, "after_steps": 3, "after_s": 0.0,
                                              "spacing_steps": 3, "spacing_s": 0.0, **sched})
    w = KernelWindows(rec, s, make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                      clock=lambda: next(clock), backend=backend, capturing=capturing or (lambda: False),
                      graphs=lambda: graphs, cuda_version=lambda: cuda, env=TeardownEnv({} if env is None else env))
    rec.on_step_end.append(w.on_step_end)
    return rec, w


def choices(rec: FakeRecorder) -> list[dict[str, Any]]:
    return [json.loads(e["detail"]) for e in rec.table("events") if e["kind"] == "window" and e["name"] == "backend"]


# -- which backend ----------------------------------------------------------------------------

def test_backend_choice() -> None:
    assert kw.choose_backend("auto", True)[0] == "cupti"
    assert kw.choose_backend("auto", False)[0] == "torch"
    assert kw.choose_backend("torch", True) == ("torch", "--kernel-backend torch")
    name, why = kw.choose_backend("cupti", False)
    assert name == "torch" and "not installed" in why


def test_cupti_found_only_when_importable(fake_cupti, monkeypatch) -> None:  # noqa: ANN001
    assert cb.available()
    monkeypatch.delitem(sys.modules, "cupti")
    monkeypatch.setattr(sys, "path", [])  # nowhere else to find it
    assert not cb.available()


@pytest.mark.parametrize(("requested", "installed", "backend"), [
    ("auto", True, "cupti"), ("auto", False, "torch"), ("torch", True, "torch"), ("cupti", True, "cupti")])
def test_install_picks_the_backend(tmp_path, monkeypatch, requested, installed, backend) -> None:  # noqa: ANN001
    import torch

    monkeypatch.setattr(kw, "cuda_built", lambda: None)  # as if this torch could drive CUDA
    monkeypatch.setattr(cb, "available", lambda: installed)
    originals = {name: getattr(torch.nn.Module, name) for name in ("to", "cuda")}
    rec = FakeRecorder(str(tmp_path), {"kernel_backend": requested})
    try:
        w = kw.install(rec)
        assert w is not None and w.backend.name == backend
        (choice,) = choices(rec)
        assert choice["backend"] == backend and choice["requested"] == requested
        # both backends pay their init at model set-up (cupti: importing cupti-python)
        assert torch.nn.Module.to is not originals["to"]
        assert not w.scheduler.initialised
    finally:
        for name, fn in originals.items():
            setattr(torch.nn.Module, name, fn)


# -- teardown ---------------------------------------------------------------------------------

class EnvProfiler(FakeProfiler):
    """Reads TEARDOWN_CUPTI as Kineto does, at every stop."""

    env: dict[str, str] = {}
    seen: list[str | None] = []

    def stop(self) -> None:
        EnvProfiler.seen.append(EnvProfiler.env.get("TEARDOWN_CUPTI"))


def torch_windows(tmp_path, env: dict[str, str], **kwargs: Any) -> tuple[FakeRecorder, KernelWindows]:  # noqa: ANN001
    rec, w = make(tmp_path, env=env, **kwargs)
    EnvProfiler.env, EnvProfiler.seen = env, []
    w.backend = kw.TorchBackend(EnvProfiler, w.env)
    return rec, w


def test_torch_backend_sets_teardown_before_every_stop(tmp_path) -> None:  # noqa: ANN001
    env: dict[str, str] = {}
    rec, w = torch_windows(tmp_path, env)
    run_steps(rec, 20)
    assert EnvProfiler.seen == ["1", "1", "1"]  # the init's stop and both windows'
    assert env == {"TEARDOWN_CUPTI": "1"} and w.torn_down
    (choice,) = choices(rec)
    assert choice["teardown"] is True and choice["backend"] == "torch"


@pytest.mark.parametrize("value", ["0", "1"])
def test_users_teardown_value_is_respected(tmp_path, value: str) -> None:  # noqa: ANN001
    env = {"TEARDOWN_CUPTI": value}
    rec, w = torch_windows(tmp_path, env)
    run_steps(rec, 20)
    assert EnvProfiler.seen == [value] * 3 and env == {"TEARDOWN_CUPTI": value}
    (choice,) = choices(rec)
    assert choice["teardown"] is (value == "1")
    assert f"TEARDOWN_CUPTI={value} set by the user" in choice["teardown_why"]
    if value == "0":
        assert "0.74-0.76" in choice["teardown_why"]  # the cost of no teardown is stated


def test_value_the_program_sets_later_is_respected(tmp_path) -> None:  # noqa: ANN001
    env: dict[str, str] = {}
    rec, w = torch_windows(tmp_path, env)
    run_steps(rec, 6)  # init and the first window, torn down
    env["TEARDOWN_CUPTI"] = "0"  # as torch does with inductor CUDA graphs
    for seq in range(6, 20):
        w.on_step_end(seq)
    assert EnvProfiler.seen == ["1", "1", "0"]
    assert choices(rec)[-1]["teardown"] is False and "set by the program" in choices(rec)[-1]["teardown_why"]


@pytest.mark.parametrize(("cuda", "teardown"), [("12.4", False), ("11.8", False), ("12.6", True), ("13.0", True)])
def test_graphs_on_old_cuda_turn_teardown_off(tmp_path, cuda: str, teardown: bool) -> None:  # noqa: ANN001
    env: dict[str, str] = {}
    rec, w = torch_windows(tmp_path, env, graphs=True, cuda=cuda)
    run_steps(rec, 20)
    assert len(rec.table("windows")) == 2
    assert EnvProfiler.seen == (["1"] * 3 if teardown else [None] * 3)
    (choice,) = choices(rec)
    assert choice["teardown"] is teardown
    if not teardown:
        assert "pytorch#144455" in choice["teardown_why"] and "0.74-0.76" in choice["teardown_why"]


def test_graphs_after_a_teardown_on_old_cuda_stop_the_windows(tmp_path) -> None:  # noqa: ANN001
    graphs = {"on": False}
    rec, w = torch_windows(tmp_path, {}, cuda="12.1")
    w.graphs = lambda: graphs["on"]
    run_steps(rec, 6)  # torn down at init and after window 0
    graphs["on"] = True
    for seq in range(6, 20):
        w.on_step_end(seq)
    assert len(rec.table("windows")) == 1 and w.scheduler.finished
    notes = [json.loads(e["detail"])["reason"] for e in rec.table("events") if e["kind"] == "note"]
    assert len(notes) == 1 and "after a CUPTI teardown" in notes[0]


def test_diags_own_value_flips_to_0_when_graphs_appear_on_old_cuda(tmp_path) -> None:  # noqa: ANN001
    env: dict[str, str] = {}
    graphs = {"on": False}
    rec, w = torch_windows(tmp_path, env, cuda="12.1", windows=1)
    w.graphs = lambda: graphs["on"]
    run_steps(rec, 5)  # init (torn down), window 0 open
    graphs["on"] = True  # captured inside the window
    for seq in range(5, 10):
        w.on_step_end(seq)
    assert EnvProfiler.seen == ["1", "0"] and env == {"TEARDOWN_CUPTI": "0"}


# -- CUDA graph capture in progress -----------------------------------------------------------

def test_no_profiler_call_while_capturing(tmp_path) -> None:  # noqa: ANN001
    capturing = {"now": False}
    rec, w = make(tmp_path, capturing=lambda: capturing["now"], windows=1)
    log: list[tuple[int, str]] = []
    now = {"seq": -1}

    class LoggingProfiler(FakeProfiler):
        def start(self) -> None:
            assert not capturing["now"]
            log.append((now["seq"], "start"))

        def stop(self) -> None:
            assert not capturing["now"]
            log.append((now["seq"], "stop"))

    w.backend = kw.TorchBackend(LoggingProfiler, w.env)
    for seq in range(20):
        capturing["now"] = seq in (0, 1, 3, 4, 5, 6, 7, 10)  # the init, the start and the stop land here first
        now["seq"] = seq
        w.on_step_end(seq)
    # init at 2 (0, 1 skipped); start at 8 (3-7 skipped); stop due at 10, skipped, done at 11
    assert log == [(2, "start"), (2, "stop"), (8, "start"), (11, "stop")]
    assert w.graphs_seen()  # a capture seen counts as graphs in use
    (row,) = rec.table("windows")
    assert row["first_seq"] == 9 and row["steps"] == 3


def test_cuda_not_initialised_is_never_asked_about_capture(tmp_path) -> None:  # noqa: ANN001
    def boom() -> bool:
        raise AssertionError("is_current_stream_capturing would initialise CUDA")

    rec, w = make(tmp_path, capturing=boom)
    w.cuda_ready = lambda: False
    run_steps(rec, 30)
    assert w.scheduler.finished and rec.table("windows") == []


# -- the cupti backend ------------------------------------------------------------------------

def test_cupti_windows_write_kineto_traces(tmp_path, fake_cupti) -> None:  # noqa: ANN001
    env: dict[str, str] = {}
    rec, w = make(tmp_path, backend=kw.CuptiBackend(), env=env)
    flags = run_steps(rec, 20)
    assert sum(flags) == 4 and env == {}  # the environment is left alone
    # the init only imports cupti-python (at the first step end here: no Module.to(cuda) seen)
    assert [e["name"] for e in rec.window_events()] == ["profiler_init", "start", "stop", "start", "stop"]
    assert fake_cupti.calls[:5] == ["register", "enable CONCURRENT_KERNEL", "enable MEMCPY", "enable MEMSET",
                                    "disable CONCURRENT_KERNEL"]
    assert fake_cupti.calls.count("finalize") == 2 and fake_cupti.calls.count("flush 1") == 2
    assert fake_cupti.enabled == set()
    windows = rec.table("windows")
    assert [r["backend"] for r in windows] == ["cupti", "cupti"]
    w.backend.wait()  # the traces are written off the program's thread
    trace = load_trace(str(tmp_path / "raw" / "kineto" / windows[0]["trace"]))
    assert trace["diag"]["records"] == 5 and trace["diag"]["dropped"] == 0


def test_cupti_trace_parses_like_a_torch_window(tmp_path, fake_cupti) -> None:  # noqa: ANN001
    window = cb.CuptiWindow(api=fake_cupti)
    window.start()
    path = str(tmp_path / "window0.1.json")
    window.stop(path)
    window.wait()  # the trace is written off the program's thread
    ours = parse_trace(load_trace(path)).kernels
    theirs = parse_trace(torch_window_trace()).kernels
    cols = ("name", "dur_ns", "kind", "category", "copy_kind", "src_mem", "dst_mem", "bytes", "device",
            "stream", "grid", "block")
    assert [tuple(r[c] for c in cols) for r in ours] == [tuple(r[c] for c in cols) for r in theirs]
    assert ours[1]["name"] == "add_kernel(float*, float*)"  # demangled, as Kineto writes it
    assert [r["src_mem"] for r in ours if r["kind"] == "memcpy"] == ["pageable", "device"]
    # the same clock: Unix-epoch ns, to within the offset reading's jitter
    assert [r["ts_ns"] - ours[0]["ts_ns"] for r in ours] == [r["ts_ns"] - theirs[0]["ts_ns"] for r in theirs]
    assert abs(ours[0]["ts_ns"] - theirs[0]["ts_ns"]) < 5_000_000


def test_cupti_no_finalize_when_the_user_says_so(tmp_path, fake_cupti) -> None:  # noqa: ANN001
    rec, w = make(tmp_path, backend=kw.CuptiBackend(), env={"TEARDOWN_CUPTI": "0"})
    run_steps(rec, 20)
    assert "finalize" not in fake_cupti.calls and len(rec.table("windows")) == 2
    assert choices(rec)[-1]["teardown"] is False


def test_cupti_records_are_bounded(tmp_path, fake_cupti) -> None:  # noqa: ANN001
    window = cb.CuptiWindow(api=fake_cupti, max_records=3)
    window.start()
    assert window.stop(str(tmp_path / "w.json")) == {"records": 3, "dropped": 2, "finalized": True}
    window.wait()


def test_cupti_that_cannot_load_falls_back_to_torch(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    def no_cupti() -> Any:
        raise ImportError("libcupti.so.13: cannot open shared object file")

    monkeypatch.setattr(cb, "load_api", no_cupti)
    env: dict[str, str] = {}
    rec, w = make(tmp_path, backend=kw.CuptiBackend(), env=env)
    run_steps(rec, 30)
    assert [e["name"] for e in rec.window_events()] == ["profiler_init", "start", "stop", "start", "stop"]
    assert [r["backend"] for r in rec.table("windows")] == ["torch", "torch"]
    assert "cupti-python failed to load" in choices(rec)[-1]["why"] and env == {"TEARDOWN_CUPTI": "1"}


def test_cupti_enable_failure_abandons(tmp_path, fake_cupti) -> None:  # noqa: ANN001
    def refuse(kind: int) -> None:
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    fake_cupti.activity_enable = refuse
    rec, w = make(tmp_path, backend=kw.CuptiBackend())
    run_steps(rec, 20)
    (note,) = [e for e in rec.table("events") if e["kind"] == "note"]
    assert "CUPTI (cupti-python) start failed" in json.loads(note["detail"])["reason"]
    assert rec.table("windows") == [] and not rec.in_window and "finalize" in fake_cupti.calls


def test_memcpy_names_match_kineto(fake_cupti) -> None:  # noqa: ANN001
    cb.learn_enums(fake_cupti)
    assert cb.memcpy_name(1, 1, 3) == "Memcpy HtoD (Pageable -> Device)"
    assert cb.memcpy_name(2, 3, 2) == "Memcpy DtoH (Device -> Pinned)"
    assert cb.memset_name(3) == "Memset (Device)"
    assert cb.MEMORY_KINDS[6] == "Device Static"


# -- run.json ---------------------------------------------------------------------------------

def test_run_json_records_the_choice(tmp_path) -> None:  # noqa: ANN001
    """Through the real recorder's raw events, as profile._kernel_status reads them."""
    from diag.collect.recorder import Recorder
    from diag.store.jsonl import read_raw

    r = Recorder(str(tmp_path), {})
    s = WindowScheduler(installed_at=0.0, windows=1, steps=2, after_steps=1, after_s=0.0)
    w = KernelWindows(r, s, make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                      capturing=lambda: False, graphs=lambda: True, cuda_version=lambda: "12.4",
                      env=TeardownEnv({}), backend_why="cupti-python not installed")
    r.on_step_end.append(w.on_step_end)
    for seq in range(6):
        r.step_ended(seq)
    r.flush()
    got = kw.recorded_choice(read_raw(str(tmp_path), "events"))
    assert got["backend"] == "torch" and got["teardown"] is False
    assert got["why"].startswith("cupti-python not installed; CUDA graphs in use with CUDA runtime 12.4")
    assert kw.recorded_choice([]) == {}
    assert os.path.exists(tmp_path / "raw" / "kineto" / f"window0.{os.getpid()}.json")


def test_cupti_stop_waits_for_the_gpu_and_drops_unfinished_records(tmp_path, fake_cupti) -> None:  # noqa: ANN001
    fake_cupti.records.append(record(ActivityKind.CONCURRENT_KERNEL, name="still_running", start=T0 + 30_000,
                                     end=0, device_id=0, stream_id=7, correlation_id=6))
    window = cb.CuptiWindow(api=fake_cupti, sync=lambda: fake_cupti.calls.append("sync"))
    window.start()
    path = str(tmp_path / "w.json")
    assert window.stop(path)["records"] == 5
    window.wait()
    assert fake_cupti.calls[4:6] == ["sync", "disable CONCURRENT_KERNEL"]  # as torch.profiler syncs at stop
    assert "still_running" not in {e["name"] for e in load_trace(path)["traceEvents"]}


def test_cupti_trace_is_written_off_the_programs_thread(tmp_path, fake_cupti, monkeypatch) -> None:  # noqa: ANN001
    """A window stops at a step end: the program's thread only stops CUPTI; a thread of diag's writes the trace."""
    import threading

    written: list[str] = []
    release = threading.Event()
    real = cb.write_trace

    def slow_write(*args: Any) -> None:
        release.wait(5)
        written.append(threading.current_thread().name)
        real(*args)

    monkeypatch.setattr(cb, "write_trace", slow_write)
    window = cb.CuptiWindow(api=fake_cupti, sync=lambda: None)
    window.start()
    path = str(tmp_path / "w.json")
    window.stop(path)  # returns while the writer waits
    assert not os.path.exists(path) and written == []
    release.set()
    window.wait()
    assert written == ["diag-window-write"] and load_trace(path)["traceEvents"]
