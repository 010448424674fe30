"""diag's exit path in a rank is bounded: a GPU stuck in a collective, a stuck hook, never hold the exit."""

from __future__ import annotations

import threading
import time

from test_hooks_torch import _fake_hooks, _rows


def _queue_steps(rec, hooks, n: int) -> list:
    ends = []
    for _ in range(n):
        events = hooks._start_events(0)
        row = rec.begin_step("torch", lambda mod, args, kwargs: ("M", 2, [(2, 4)], "float32", "cuda:0"))
        rec.end_step(row, hooks._await_gpu, events)
        ends.append(events[1])
    return ends


def test_resolve_at_exit_gives_up_on_a_stuck_gpu(tmp_path) -> None:
    """Events that never complete (a rank waiting in NCCL forever): rows written with gpu_ns -1, in bounded time."""
    rec, hooks = _fake_hooks(tmp_path)
    hooks.exit_wait_s = 0.3
    ends = _queue_steps(rec, hooks, 3)
    t0 = time.monotonic()
    hooks.resolve(block=True)
    took = time.monotonic() - t0
    assert took < 1.0
    rows = _rows(rec, "steps")
    assert [r["seq"] for r in rows] == [0, 1, 2] and all(r["gpu_ns"] == -1 for r in rows)
    assert not any(e.synced for e in ends)  # never a blocking synchronize


def test_resolve_at_exit_waits_for_work_that_finishes(tmp_path) -> None:
    rec, hooks = _fake_hooks(tmp_path)
    ends = _queue_steps(rec, hooks, 2)

    def gpu_finishes() -> None:
        time.sleep(0.1)
        for e in ends:
            e.done = True

    threading.Thread(target=gpu_finishes).start()
    hooks.resolve(block=True)
    rows = _rows(rec, "steps")
    assert [r["gpu_ns"] for r in rows] == [500_000, 500_000]


def test_resolve_at_exit_does_not_wait_on_a_held_lock(tmp_path) -> None:
    rec, hooks = _fake_hooks(tmp_path)
    hooks.exit_wait_s = 0.2
    _queue_steps(rec, hooks, 1)
    hooks.lock.acquire()  # another thread inside resolve, stuck
    t0 = time.monotonic()
    hooks.resolve(block=True)
    assert time.monotonic() - t0 < 1.0


def test_py_spy_never_stops_the_target_and_its_stop_is_bounded(tmp_path) -> None:
    """py-spy runs --nonblocking (no ptrace stop of a rank); one that ignores SIGINT is killed in bounded time."""
    import subprocess
    import sys

    from diag.collect.stack_sampler import StackSampler

    fake = tmp_path / "py-spy"
    args_file = tmp_path / "args"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {args_file}\ntrap '' INT\nsleep 60\n")
    fake.chmod(0o755)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        s = StackSampler(rate_hz=10, py_spy=str(fake), stop_timeout_s=0.5)
        (tmp_path / "run").mkdir()
        s.start(str(tmp_path / "run"), target.pid)
        for _ in range(100):
            if args_file.exists() and args_file.read_text():
                break
            time.sleep(0.05)
        args = args_file.read_text().split()
        assert "--nonblocking" in args and "--native" not in args
        t0 = time.monotonic()
        s.stop()
        assert time.monotonic() - t0 < 8.0
    finally:
        target.kill()
        target.wait()
