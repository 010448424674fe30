"""--idle-priority: diag's sampler threads and py-spy run under SCHED_IDLE, the target and diag's main thread do not."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from test_stack_sampler import _fake_py_spy

from diag.cli import build_parser
from diag.collect import profile
from diag.collect.sampler import PeriodicSampler, idle_priority
from diag.collect.stack_sampler import StackSampler

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")


def test_idle_priority_moves_only_the_calling_thread() -> None:
    seen: dict[str, int] = {}

    def worker() -> None:
        seen["ok"] = idle_priority()
        seen["policy"] = os.sched_getscheduler(0)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"ok": True, "policy": os.SCHED_IDLE}
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # this (main) thread is untouched


class Ticks(PeriodicSampler):
    name = "ticks"

    def __init__(self) -> None:
        super().__init__(0.01)
        self.policies: list[int] = []

    def tick(self) -> None:
        self.policies.append(os.sched_getscheduler(0))


@pytest.mark.parametrize("idle", [True, False])
def test_a_periodic_sampler_ticks_at_the_priority_asked_and_says_so(tmp_path, idle: bool) -> None:
    s = Ticks()
    s.idle = idle
    s.start(str(tmp_path), os.getpid())
    deadline = time.monotonic() + 5
    while len(s.policies) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.policies and set(s.policies) == {os.SCHED_IDLE if idle else os.SCHED_OTHER}
    assert s.status()["priority"] == ("idle" if idle else "normal")


@pytest.mark.parametrize("idle", [True, False])
def test_py_spy_is_started_at_the_priority_asked(tmp_path, idle: bool) -> None:
    exe, _ = _fake_py_spy(tmp_path)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        s = StackSampler(rate_hz=10, py_spy=exe)
        s.idle = idle
        s.start(str(tmp_path), target.pid)
        policy = os.sched_getscheduler(s._proc.pid)
        target_policy = os.sched_getscheduler(target.pid)
        s.stop()
    finally:
        target.kill()
        target.wait()
    assert policy == (os.SCHED_IDLE if idle else os.SCHED_OTHER)
    assert s.status()["priority"] == ("idle" if idle else "normal")
    assert target_policy == os.SCHED_OTHER  # the target keeps its priority


def test_the_flag_is_off_by_default_and_reaches_every_sampler() -> None:
    parser = build_parser()
    assert parser.parse_args(["profile"]).idle_priority is False
    assert parser.parse_args(["profile", "--idle-priority"]).idle_priority is True
    samplers, _ = profile._samplers(profile.ProfileOptions(idle_priority=True, gpu=False))
    assert samplers and all(s.idle for s in samplers)
    samplers, _ = profile._samplers(profile.ProfileOptions(gpu=False))
    assert not any(s.idle for s in samplers)
