"""Kernel windows: the pure scheduler (fake clock) and the torch side (fake and real CPU profiler)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from diag.collect import kernel_windows as kw
from diag.collect.kernel_windows import INIT, START, STOP, KernelWindows, WindowScheduler


class FakeRecorder:
    """The part of diag.collect.recorder.Recorder that kernel windows use."""

    def __init__(self, run_dir: str, options: dict[str, Any] | None = None) -> None:
        self.run_dir = run_dir
        self.options = options or {}
        self.in_window = False
        self.on_step_end: list = []
        self.flush_hooks: list = []
        self.rows: list[tuple[str, dict[str, Any]]] = []

    def write(self, table: str, row: dict[str, Any]) -> None:
        self.rows.append((table, dict(row, pid=os.getpid())))

    def event(self, kind: str, name: str = "", ts_ns: int | None = None, dur_ns: int = 0, **detail: Any) -> None:
        self.write("events", {"ts_ns": ts_ns, "dur_ns": dur_ns, "kind": kind, "name": name,
                              "detail": json.dumps(detail)})

    def note(self, name: str, reason: str) -> None:
        self.event("note", name, ts_ns=0, reason=reason)

    def table(self, name: str) -> list[dict[str, Any]]:
        return [r for t, r in self.rows if t == name]

    def window_events(self) -> list[dict[str, Any]]:
        """events rows but the backend/teardown choice (tests/test_kernel_backends.py checks those)."""
        return [e for e in self.table("events") if not (e["kind"] == "window" and e["name"] == "backend")]


class FakeProfiler:
    log: list[str] = []

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on

    def start(self) -> None:
        FakeProfiler.log.append("start")
        if self.fail_on == "start":
            raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    def stop(self) -> None:
        FakeProfiler.log.append("stop")

    def export_chrome_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"traceEvents": []}, f)


def drive(s: WindowScheduler, times: list[float]) -> list[tuple[int, str]]:
    """Feed step ends at the given clock times; record and acknowledge every action."""
    actions = []
    for seq, now in enumerate(times):
        a = s.decide(seq, now)
        if a:
            actions.append((seq, a))
            s.done(a, seq, now)
    return actions


def test_scheduler_default_plan() -> None:
    s = WindowScheduler(installed_at=0.0)
    # 10 steps a second for 20 s.
    actions = drive(s, [0.1 * (i + 1) for i in range(200)])
    # init after the first step; first window after step 20 AND 3 s; 5 steps each; 5 s + 20 steps apart.
    assert actions == [(0, INIT), (29, START), (34, STOP), (84, START), (89, STOP)]
    assert s.finished


def test_scheduler_waits_for_seconds_and_steps() -> None:
    s = WindowScheduler(installed_at=100.0, windows=1, steps=2, after_steps=3, after_s=10.0)
    # Slow steps: 5 s each; steps count is the bound.
    assert drive(s, [100.0 + 5 * (i + 1) for i in range(8)]) == [(0, INIT), (3, START), (5, STOP)]


def test_scheduler_closes_long_window_and_can_be_off() -> None:
    s = WindowScheduler(installed_at=0.0, windows=1, steps=100, after_steps=1, after_s=0.0, max_s=2.0)
    assert drive(s, [float(i) for i in range(10)]) == [(0, INIT), (1, START), (3, STOP)]
    off = WindowScheduler(installed_at=0.0, windows=0)
    assert drive(off, [float(i) for i in range(50)]) == []
    failed = WindowScheduler(installed_at=0.0)
    failed.failed()
    assert failed.decide(100, 100.0) is None and failed.finished


def test_scheduler_from_options() -> None:
    s = WindowScheduler.from_options({"kernel_windows": 3, "kernel_window_steps": 2}, installed_at=1.0)
    assert (s.windows, s.steps, s.after_steps, s.after_s) == (3, 2, 20, 3.0)


def make(tmp_path, fail_on: str | None = None, cuda: bool = True, busy: bool = False, **sched: Any) -> tuple[FakeRecorder, KernelWindows]:
    rec = FakeRecorder(str(tmp_path))
    clock = iter(float(i) for i in range(10_000))
    s = WindowScheduler(installed_at=0.0, **{"windows": 2, "steps": 2, "after_steps": 3, "after_s": 0.0,
                                              "spacing_steps": 3, "spacing_s": 0.0, **sched})
    w = KernelWindows(rec, s, make_profiler=lambda: FakeProfiler(fail_on), cuda_ready=lambda: cuda,
                      profiler_busy=lambda: busy, clock=lambda: next(clock), capturing=lambda: False,
                      env=kw.TeardownEnv({}))
    rec.on_step_end.append(w.on_step_end)
    return rec, w


def run_steps(rec: FakeRecorder, n: int) -> list[bool]:
    flags = []
    for seq in range(n):
        flags.append(rec.in_window)  # what the step starting now would be flagged with
        for cb in rec.on_step_end:
            cb(seq)
    return flags


def test_windows_written(tmp_path) -> None:
    rec, w = make(tmp_path)
    flags = run_steps(rec, 20)
    assert flags[4:6] == [True, True] and flags[9:11] == [True, True] and sum(flags) == 4
    assert w.on_step_end not in rec.on_step_end  # done: steps no longer call it
    events = rec.window_events()
    assert [e["name"] for e in events] == ["profiler_init", "start", "stop", "start", "stop"]
    assert all(e["kind"] == "window" and e["dur_ns"] >= 0 for e in events)
    windows = rec.table("windows")
    assert [(w["window"], w["steps"], w["first_seq"]) for w in windows] == [(0, 2, 4), (1, 2, 9)]
    for w in windows:
        assert w["trace"] == f"window{w['window']}.{os.getpid()}.json"
        assert os.path.exists(tmp_path / "raw" / "kineto" / w["trace"])
        assert w["profiler_start_ns"] >= 0 and w["dur_ns"] >= 0


def test_profiler_failure_stops_windows_and_notes(tmp_path) -> None:
    rec, w = make(tmp_path, fail_on="start")
    run_steps(rec, 20)  # must not raise
    notes = [e for e in rec.window_events() if e["kind"] == "note"]
    assert len(notes) == 1 and "CUPTI_ERROR_NOT_INITIALIZED" in json.loads(notes[0]["detail"])["reason"]
    assert rec.table("windows") == [] and not rec.in_window and w.scheduler.finished


def test_cpu_program_gets_no_window(tmp_path) -> None:
    rec, w = make(tmp_path, cuda=False)
    run_steps(rec, 20)
    events = rec.window_events()
    assert [e["kind"] for e in events] == ["note"]
    assert "CUDA not initialised" in json.loads(events[0]["detail"])["reason"]
    assert w.scheduler.finished


def test_program_with_its_own_profiler_is_left_alone(tmp_path) -> None:
    rec, w = make(tmp_path, busy=True)
    FakeProfiler.log.clear()
    run_steps(rec, 20)
    assert FakeProfiler.log == [] and w.scheduler.finished
    (note,) = rec.window_events()
    assert "its own profiler" in json.loads(note["detail"])["reason"]


def test_close_at_exit_keeps_open_window(tmp_path) -> None:
    rec, w = make(tmp_path, windows=1, steps=50)
    run_steps(rec, 6)
    assert rec.in_window
    w.close()
    assert not rec.in_window
    (row,) = rec.table("windows")
    assert row["steps"] == 2 and row["first_seq"] == 4


def test_install_on_cpu_torch_notes_why(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    if torch.version.cuda:
        pytest.skip("CUDA build of torch")
    rec = FakeRecorder(str(tmp_path))
    assert kw.install(rec) is None
    assert rec.on_step_end == []
    (note,) = rec.window_events()
    assert json.loads(note["detail"])["reason"] == "torch built without CUDA"


def test_real_cpu_profiler_window(tmp_path) -> None:
    """The real torch.profiler (CPU activity only here) through a window; the trace parses."""
    torch = pytest.importorskip("torch")
    import torch.profiler as tp

    from diag.store.kineto import load_trace, parse_trace

    rec = FakeRecorder(str(tmp_path))
    s = WindowScheduler(installed_at=0.0, windows=1, steps=2, after_steps=1, after_s=0.0)
    w = KernelWindows(rec, s, make_profiler=lambda: tp.profile(activities=[tp.ProfilerActivity.CPU]),
                      cuda_ready=lambda: True, capturing=lambda: False, env=kw.TeardownEnv({}))  # the real profiler_busy check runs here
    rec.on_step_end.append(w.on_step_end)
    x = torch.randn(4, 8)
    for seq in range(5):
        with torch.profiler.record_function("stage_a"):
            x = torch.nn.functional.gelu(x @ torch.eye(8))
        w.on_step_end(seq)
    (row,) = rec.table("windows")
    assert row["steps"] == 2
    trace = load_trace(str(tmp_path / "raw" / "kineto" / row["trace"]))
    ranges = parse_trace(trace).ranges
    assert [r["name"] for r in ranges] == ["stage_a", "stage_a"]
    # The stages ran inside the window: after its start, before its stop.
    assert all(row["ts_ns"] - 10**6 <= r["ts_ns"] <= row["ts_ns"] + row["dur_ns"] + 10**6 for r in ranges)


def test_with_the_real_recorder(tmp_path) -> None:
    """Rows go through diag.collect.recorder.Recorder into raw/*.jsonl, and the kernels table reads back."""
    from diag.collect.recorder import Recorder
    from diag.store.jsonl import read_jsonl

    rec = Recorder(str(tmp_path), {"kernel_window_after_steps": 2, "kernel_window_after_s": 0})
    s = WindowScheduler.from_options(rec.options, installed_at=0.0)
    w = KernelWindows(rec, s, make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                      capturing=lambda: False, env=kw.TeardownEnv({}))
    rec.on_step_end.append(w.on_step_end)
    flags = []
    for seq in range(12):
        flags.append(rec.in_window)
        rec.step_ended(seq)
    rec.flush()
    assert sum(flags) == 5
    pid = os.getpid()
    (row,) = read_jsonl(str(tmp_path / "raw" / f"windows.{pid}.jsonl"))
    assert row["pid"] == pid and row["steps"] == 5 and row["trace"] == f"window0.{pid}.json"
    events = read_jsonl(str(tmp_path / "raw" / f"events.{pid}.jsonl"))
    assert [(e["kind"], e["name"]) for e in events] == [("window", "backend"), ("window", "profiler_init"),
                                                         ("window", "start"), ("window", "stop")]


def test_init_is_paid_when_the_model_moves_to_the_gpu(tmp_path) -> None:
    """The one-time profiler init runs at model set-up (Module.to), not in the first step."""
    import torch

    rec, w = make(tmp_path)
    original_to = torch.nn.Module.to
    kw._init_after_model_moves_to_gpu(w)
    try:
        assert torch.nn.Module.to is not original_to
        torch.nn.Linear(2, 2).to("cpu")  # the fake says CUDA is now initialised
        assert torch.nn.Module.to is original_to  # the wrappers removed themselves
        assert [e["name"] for e in rec.window_events()] == ["profiler_init"]
        assert w.scheduler.initialised
        run_steps(rec, 20)  # no second init at the first step
        assert [e["name"] for e in rec.window_events()].count("profiler_init") == 1
    finally:
        torch.nn.Module.to = original_to


def test_quiet_until_never_hides_an_action() -> None:
    """Wherever quiet_until() says a step is too early, decide() has nothing to do there."""
    s = WindowScheduler(installed_at=0.0, windows=3, steps=4, after_steps=10, after_s=2.0,
                        spacing_steps=7, spacing_s=1.5)
    for seq in range(400):
        now = 0.05 * seq
        quiet = s.quiet_until()
        action = s.decide(seq, now)
        if quiet is not None and (seq < quiet[0] or now < quiet[1]):
            assert action is None, (seq, now, quiet)
        if action:
            s.done(action, seq, now)
    assert s.finished and s.opened == 3


def test_between_windows_the_recorder_skips_the_callback(tmp_path) -> None:
    """A fast loop pays a comparison a step between windows, not a call; the windows open at the same steps."""
    from diag.collect.recorder import Recorder

    def run(gated: bool) -> tuple[list[int], int]:
        rec = Recorder(str(tmp_path / str(gated)), {"kernel_window_after_steps": 20, "kernel_window_after_s": 1.0,
                                                    "kernel_window_spacing_s": 0.5, "kernel_window_steps": 3})
        now = [0.0]
        w = KernelWindows(rec, WindowScheduler.from_options(rec.options, installed_at=0.0),
                          make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                          clock=lambda: now[0], capturing=lambda: False, env=kw.TeardownEnv({}))
        calls = []

        def counted(seq: int) -> None:  # calls while windows are still to come (after, _detach drops them)
            if not w.scheduler.finished:
                calls.append(seq)
            w.on_step_end(seq)

        rec.on_step_end.append(counted)
        opened = []
        for seq in range(3000):
            now[0] = 0.001 * seq  # 1000 steps a second
            was_in = rec.in_window
            rec.end_step(rec.begin_step("test"))
            if rec.in_window and not was_in:
                opened.append(seq)
            if not gated:
                rec.step_end_due = 0  # a recorder without the gate: called at every step end
        return opened, len(calls)

    (opened, every), (gated_opened, calls) = run(False), run(True)
    assert gated_opened == opened and len(opened) == 2
    assert calls < every / 10, (calls, every)


def test_a_loop_that_slows_down_still_gets_its_window_near_the_due_time(tmp_path) -> None:
    """200 steps of 10 µs, then steps of 10 ms: the first window opens within 0.2 s of its due time
    (1 s), not thousands of slow steps later at the fast steps' rate."""
    from diag.collect.recorder import Recorder

    rec = Recorder(str(tmp_path), {"kernel_window_after_steps": 20, "kernel_window_after_s": 1.0})
    now = [0.0]
    w = KernelWindows(rec, WindowScheduler.from_options(rec.options, installed_at=0.0),
                      make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                      clock=lambda: now[0], capturing=lambda: False, env=kw.TeardownEnv({}))
    rec.on_step_end.append(w.on_step_end)
    opened_at = None
    for seq in range(1000):
        now[0] = 1e-5 * min(seq, 200) + 1e-2 * max(0, seq - 200)
        rec.end_step(rec.begin_step("test"))
        if rec.in_window:
            opened_at = now[0]
            break
    assert opened_at is not None and 1.0 <= opened_at <= 1.2, opened_at
