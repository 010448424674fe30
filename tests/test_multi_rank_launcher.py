"""The launcher with a torchrun-like target: ranks in sessions of their own are followed, waited for
(bounded) and stopped with the job."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from test_launcher import FAST, diag, py

# A launcher like torchrun: its worker runs in a session of its own (no terminal signal reaches it).
# On SIGINT this launcher leaves at once without stopping its worker (a launcher that is stuck or buggy).
LAUNCHER = """
import signal, subprocess, sys, time
kid = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({kid_s})'], start_new_session=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the test reads diag's pipes to EOF
open({pidfile!r}, 'w').write(str(kid.pid))
signal.signal(signal.SIGINT, lambda *a: sys.exit(0))
time.sleep({root_s})
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:][:1] != b"Z"
    except OSError:
        return False


def _run(tmp_path: Path, kid_s: float, root_s: float, *opts: str) -> tuple[float, dict, int]:
    pidfile = str(tmp_path / "kid.pid")
    t0 = time.monotonic()
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, *opts, "--",
             *py(LAUNCHER.format(kid_s=kid_s, root_s=root_s, pidfile=pidfile)))
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    return took, manifest, int(Path(pidfile).read_text())


def test_the_rest_of_the_tree_is_waited_for(tmp_path: Path) -> None:
    """The root exits first; its worker ends 4 s after it started: diag waits for it (within --grace)."""
    took, manifest, kid = _run(tmp_path, 4, 0.6, "--grace", "10")
    assert not _alive(kid)
    assert "outlived_pids" not in manifest
    assert manifest["duration_s"] >= 3.5


def test_a_worker_left_running_is_bounded_and_named(tmp_path: Path) -> None:
    """The root exits on its own, a worker goes on: diag waits --grace, then leaves it and says so."""
    took, manifest, kid = _run(tmp_path, 60, 0.6, "--grace", "0.5")
    try:
        assert took < 20
        assert manifest["outlived_pids"] == [kid]
        assert _alive(kid)  # diag did not stop a job it was not asked to stop
    finally:
        os.kill(kid, signal.SIGKILL)


def test_stopping_the_job_stops_the_whole_tree(tmp_path: Path) -> None:
    """--duration: the root leaves on SIGINT without its worker; diag escalates on the worker (bounded)."""
    took, manifest, kid = _run(tmp_path, 60, 60, "--duration", "1", "--grace", "0.5")
    try:
        assert took < 20
        assert not _alive(kid)
        assert manifest["stopped_by_duration"] is True and "outlived_pids" not in manifest
    finally:
        if _alive(kid):
            os.kill(kid, signal.SIGKILL)
