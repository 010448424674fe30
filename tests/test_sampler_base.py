"""The sampler base: a sampler that breaks reports why, and the run goes on."""

from __future__ import annotations

import sys
import time
from typing import Any

from diag.collect import profile
from diag.collect.sampler import PeriodicSampler, Sampler, Unavailable


class FailsAtStart(PeriodicSampler):
    name = "fails_at_start"
    tables = ("never",)

    def __init__(self) -> None:
        super().__init__(0.01)
        self.closed = 0

    def open(self, run_dir: str, root_pid: int) -> None:
        raise OSError("device busy")

    def tick(self) -> None:
        raise AssertionError("never sampled")

    def close(self) -> None:
        self.closed += 1


class NotHere(FailsAtStart):
    name = "not_here"

    def open(self, run_dir: str, root_pid: int) -> None:
        raise Unavailable("no such device")


class RaisesWhileSampling(PeriodicSampler):
    name = "raises_while_sampling"
    tables = ("ticks",)

    def __init__(self) -> None:
        super().__init__(0.01)
        self.ticks = 0

    def open(self, run_dir: str, root_pid: int) -> dict[str, Any]:
        return {"flavour": "test"}

    def tick(self) -> None:
        self.ticks += 1
        self.write("ticks", {"ts_ns": time.time_ns(), "n": self.ticks})
        if self.ticks == 3:
            raise ValueError("bad reading")


def _wait_for(cond, timeout: float = 5.0) -> None:  # noqa: ANN001
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.01)


def test_failure_at_start_is_recorded_and_released(tmp_path) -> None:
    s = FailsAtStart()
    assert isinstance(s, Sampler)
    s.start(str(tmp_path), 1)
    assert s.status() == {"status": "failed", "reason": "OSError: device busy"}
    assert s.closed == 1  # what open() took is released
    s.stop()
    s.stop()  # safe twice
    assert s.status()["status"] == "failed"
    assert not (tmp_path / "raw").exists()  # no table opened


def test_unavailable_at_start() -> None:
    s = NotHere()
    s.start("/nonexistent", 1)
    s.stop()
    assert s.status() == {"status": "unavailable", "reason": "no such device"}


def test_error_while_sampling_ends_sampling_and_says_why(tmp_path) -> None:
    s = RaisesWhileSampling()
    s.start(str(tmp_path), 1)
    assert s.status()["status"] == "ok" and s.status()["flavour"] == "test"
    _wait_for(lambda: s.status()["status"] != "ok")
    s.stop()
    st = s.status()
    assert st["status"] == "failed" and st["reason"] == "ValueError: bad reading"
    assert st["samples"] == 2 and st["cpu_s"] >= 0  # its own accounting survives the failure
    assert s.ticks == 3
    assert len((tmp_path / "raw").glob("ticks.*.jsonl").__next__().read_text().splitlines()) == 3


def test_broken_samplers_do_not_stop_the_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(profile, "_samplers", lambda opts: ([FailsAtStart(), RaisesWhileSampling()], {}))
    opts = profile.ProfileOptions(out=str(tmp_path / "run"), stacks=False, gpu=False, hooks=False)
    rec = profile.record([sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(3)"], opts)
    assert rec.exit_code == 3
    collectors = rec.manifest["collectors"]
    assert collectors["fails_at_start"]["status"] == "failed"
    assert collectors["raises_while_sampling"] == {**collectors["raises_while_sampling"], "status": "failed",
                                                   "reason": "ValueError: bad reading"}
    assert rec.manifest["partial"] is False
