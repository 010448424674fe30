"""The saturation signal (diag/collect/cpu_load.py) and the host sampler's interval that follows it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from diag.collect import host_sampler
from diag.collect.cpu_load import FREE_SPARE_CORES, SATURATED_SPARE_CORES, IdleCpu, saturated
from diag.collect.host_sampler import HostSampler
from diag.collect.profile import ProfileOptions, _samplers


class FakeLoad(IdleCpu):
    """Idle cores as the test says, one value per look (the last one repeats), whatever the machine does."""

    def __init__(self, spare: list[float], cores: int = 2) -> None:
        super().__init__(cores=cores)
        self.spare = spare

    def add(self, now: float, idle_s: float, total_s: float) -> None:
        pass

    def spare_cores(self) -> float | None:
        return self.spare.pop(0) if len(self.spare) > 1 else self.spare[0]


def test_saturated_with_hysteresis_on_small_hosts_only():
    assert saturated(2, 0.05, was_saturated=False)
    assert not saturated(2, 1.2, was_saturated=True)
    between = (SATURATED_SPARE_CORES + FREE_SPARE_CORES) / 2
    assert saturated(2, between, was_saturated=True) and not saturated(2, between, was_saturated=False)
    assert saturated(4, 0.0, was_saturated=False)
    assert not saturated(8, 0.0, was_saturated=False)  # a big host has a core for diag


def test_idle_cpu_window_from_cumulative_counters():
    load = IdleCpu(window_s=3.0, cores=2)
    load.add(0.0, idle_s=100.0, total_s=1000.0)
    load.add(1.0, idle_s=100.1, total_s=1002.0)
    assert load.spare_cores() is None  # window not full yet
    load.add(3.0, idle_s=100.3, total_s=1006.0)
    assert load.spare_cores() == pytest.approx(2 * 0.3 / 6.0)
    load.add(4.0, idle_s=101.3, total_s=1008.0)  # last 3 s: 1.2 idle of 6 -> 0.4 core
    assert load.spare_cores() == pytest.approx(2 * 1.2 / 6.0)


def _sample(tmp_path, sampler: HostSampler, seconds: float) -> dict:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler.start(str(tmp_path), child.pid)
        time.sleep(seconds)
        sampler.stop()
    finally:
        child.kill()
        child.wait()
    return sampler.status()


def test_host_interval_stretches_while_saturated_and_comes_back(tmp_path):
    # saturated at the first look, for 3 looks, then a core free again
    s = HostSampler(0.1, adaptive=True, load=FakeLoad([0.05, 0.05, 0.05, 1.5]))
    st = _sample(tmp_path, s, 2.2)
    steps = [(c["interval_s"], c.get("spare_cores")) for c in st["intervals"]]
    assert steps == [(0.1, None), (host_sampler.SATURATED_INTERVAL_S, 0.05), (0.1, 1.5)]
    assert "cores idle" in st["intervals"][1]["why"] and st["adaptive"] is True
    assert st["interval_s"] == 0.1  # the base interval
    # 1 tick, 3 at 0.5 s (1.5 s), then 0.1 s ticks for the rest: far fewer than 22 ticks at 0.1 s
    assert 6 <= st["samples"] <= 14


def test_host_interval_kept_on_a_big_host_or_when_given(tmp_path):
    st = _sample(tmp_path / "big", HostSampler(0.1, adaptive=True, load=FakeLoad([0.0], cores=16)), 0.6)
    assert [c["interval_s"] for c in st["intervals"]] == [0.1] and "kept" in st["intervals"][0]["why"]
    assert st["samples"] >= 4
    st = _sample(tmp_path / "given", HostSampler(0.1), 0.3)
    assert "intervals" not in st and "adaptive" not in st


def test_profile_adapts_the_host_interval_only_when_not_given():
    def host(opts: ProfileOptions) -> HostSampler:
        return next(s for s in _samplers(opts)[0] if isinstance(s, HostSampler))

    default = host(ProfileOptions(stacks=False, gpu=False))
    assert default._load is not None and default.interval_s == host_sampler.DEFAULT_INTERVAL_S
    given = host(ProfileOptions(stacks=False, gpu=False, host_interval_s=0.25))
    assert given._load is None and given.interval_s == 0.25
