"""Kernel windows in a multi-rank job: every rank opens and closes them at the same step numbers."""

from __future__ import annotations

import json
import random

from test_kernel_windows import FakeProfiler, FakeRecorder

from diag.collect import kernel_windows as kw
from diag.collect.kernel_windows import START, STOP, KernelWindows, WindowScheduler


def rank_clock(seed: int, steps: int) -> list[float]:
    """Step-end times of one rank: its own start offset and jittery step times (seconds)."""
    r = random.Random(seed)
    t, out = r.uniform(0.0, 5.0), []
    for _ in range(steps):
        t += r.uniform(0.001, 0.4)
        out.append(t)
    return out


def plan(s: WindowScheduler, times: list[float]) -> list[tuple[int, str]]:
    """The (step, action) a scheduler takes, acknowledging each (INIT included)."""
    out = []
    for seq, now in enumerate(times):
        a = s.decide(seq, now)
        if a:
            out.append((seq, a))
            s.done(a, seq, now)
    return out


def windows_of(actions: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(seq, a) for seq, a in actions if a in (START, STOP)]


def test_ranks_with_different_clocks_pick_the_same_steps() -> None:
    opts = {"kernel_windows": 3, "kernel_window_steps": 4, "kernel_window_after_s": 3.0,
            "kernel_window_spacing_s": 5.0, "kernel_window_max_s": 0.5}
    plans = []
    for rank in range(4):
        times = rank_clock(rank, 300)
        s = WindowScheduler.from_options(opts, installed_at=times[0] - random.Random(rank + 9).uniform(0, 3), ranks=4)
        plans.append(windows_of(plan(s, times)))
    assert plans[0] == [(20, START), (24, STOP), (44, START), (48, STOP), (68, START), (72, STOP)]
    assert all(p == plans[0] for p in plans)


def test_the_same_clocks_desynchronise_single_process_schedulers() -> None:
    """Control: with the time conditions kept (ranks=1) the same clocks give different steps."""
    opts = {"kernel_windows": 3, "kernel_window_steps": 4, "kernel_window_after_s": 3.0,
            "kernel_window_spacing_s": 5.0, "kernel_window_max_s": 0.5}
    plans = []
    for rank in range(4):
        times = rank_clock(rank, 300)
        s = WindowScheduler.from_options(opts, installed_at=times[0] - random.Random(rank + 9).uniform(0, 3))
        plans.append(windows_of(plan(s, times)))
    assert len({tuple(p) for p in plans}) > 1


def test_world_size_from_the_environment() -> None:
    assert kw.world_size({"WORLD_SIZE": "8"}) == 8
    assert kw.world_size({}) == 1
    assert kw.world_size({"WORLD_SIZE": "x"}) == 1
    assert kw.world_size({"WORLD_SIZE": "0"}) == 1


def test_install_records_the_step_schedule(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(kw, "cuda_built", lambda: None)
    monkeypatch.setattr(kw, "make_backend", lambda req, env: (kw.TorchBackend(FakeProfiler, env), "test"))
    monkeypatch.setattr(kw, "_init_after_model_moves_to_gpu", lambda k: None)
    rec = FakeRecorder(str(tmp_path), {"kernel_windows": 2})
    w = kw.install(rec)
    assert w is not None and w.scheduler.by_steps and w.scheduler.ranks == 2
    choice = kw.recorded_choice(rec.table("events"))
    assert choice["world_size"] == 2 and "by step number only" in choice["schedule"]


def test_no_windows_in_a_multi_rank_job_without_teardown(tmp_path) -> None:
    """TEARDOWN_CUPTI=0 (CUPTI stays subscribed beside NCCL): no init, no window, the reason noted."""
    FakeProfiler.log = []
    rec = FakeRecorder(str(tmp_path))
    s = WindowScheduler(installed_at=0.0, windows=2, steps=2, after_steps=1, ranks=2)
    env = kw.TeardownEnv({"TEARDOWN_CUPTI": "0"})
    w = KernelWindows(rec, s, make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                      capturing=lambda: False, env=env)
    for seq in range(30):
        w.on_step_end(seq)
    assert FakeProfiler.log == [] and rec.table("windows") == []
    (note,) = [e for e in rec.table("events") if e["kind"] == "note"]
    assert "2-rank job without CUPTI teardown" in json.loads(note["detail"])["reason"]


def test_multi_rank_job_with_teardown_runs_its_windows(tmp_path) -> None:
    FakeProfiler.log = []
    rec = FakeRecorder(str(tmp_path))
    s = WindowScheduler(installed_at=0.0, windows=2, steps=2, after_steps=1, spacing_steps=3, ranks=2)
    w = KernelWindows(rec, s, make_profiler=FakeProfiler, cuda_ready=lambda: True, profiler_busy=lambda: False,
                      capturing=lambda: False, env=kw.TeardownEnv({}))
    for seq in range(30):
        w.on_step_end(seq)
    assert [r["first_seq"] for r in rec.table("windows")] == [2, 7]
