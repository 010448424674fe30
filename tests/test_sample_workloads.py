"""Every sample workload runs on CPU, stops on time or on SIGINT, and exits 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:  # tests/ is not a package today; keep working if it becomes one
    from accuracy_expected import EXPECTED
except ImportError:
    from tests.accuracy_expected import EXPECTED

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = sorted(p.stem for p in (ROOT / "sample_workloads").glob("*.py") if not p.stem.startswith("_"))
SUMMARY = re.compile(r"^\w+: \d+ \w+ in [\d.]+ s = [\d.]+ \w+/s on cpu", re.MULTILINE)
BANNED = (
    "compute",
    "memory",
    "transfer",
    "launch",
    "cpu_bound",
    "io_bound",
    "cold",
    "queueing",
    "bound",
    "slow",
)


def start(name: str, seconds: float) -> subprocess.Popen[str]:
    cmd = [sys.executable, f"sample_workloads/{name}.py", "--device", "cpu", "--seconds", str(seconds)]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
    }  # these runs only check behaviour; keep the 2 cores for all of them
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def catches_sigterm(pid: int) -> bool:
    """True once the workload has installed its own signal handlers (SIGTERM is caught from then on)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.MULTILINE).group(1), 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def interrupt_when_running(proc: subprocess.Popen[str], timeout: float = 120) -> None:
    """Send SIGINT (what `diag profile --duration` sends) once the workload is past its set-up."""
    end = time.monotonic() + timeout
    while proc.poll() is None and not catches_sigterm(proc.pid) and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)


def test_every_label_has_a_workload() -> None:
    labels = {label for devices in EXPECTED.values() for label, _ in devices.values()}
    assert len(labels) == 8
    assert set(EXPECTED) == set(WORKLOADS)


def test_names_do_not_give_the_answer_away() -> None:
    for name in WORKLOADS:
        assert not any(word in name for word in BANNED), name


@pytest.mark.slow
def test_workloads_run_on_cpu_and_exit_cleanly() -> None:
    # All at once, so the test costs one torch import's worth of wall time, not nine.
    procs = {name: start(name, 2) for name in WORKLOADS}
    interrupted = {name: start(name, 300) for name in ("encoder_server", "shard_embedder")}
    for proc in interrupted.values():
        interrupt_when_running(proc)
    for name, proc in [*procs.items(), *((f"{n} (SIGINT)", p) for n, p in interrupted.items())]:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{err[-2000:]}"
        assert SUMMARY.search(out), f"{name}: no summary line in {out!r}"
