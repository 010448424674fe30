"""Launcher semantics, seen as a user sees them: through the `diag` command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diag.collect import launcher
from diag.store.run import open_run

DIAG = [sys.executable, "-m", "diag.cli"]
FAST = ["--no-stacks", "--no-gpu", "--quiet"]


def diag(*args: str, input: bytes | None = None, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*DIAG, *args], input=input, capture_output=True, timeout=timeout, **kw)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("code", [0, 3, 42])
def test_exit_code_is_the_targets(tmp_path: Path, code: int) -> None:
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(f"raise SystemExit({code})"))
    assert r.returncode == code
    m = json.loads((tmp_path / "run" / "run.json").read_text())
    assert m["exit_code"] == code and m["partial"] is False


def _no_core_limit() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT])
def test_death_by_a_signal_diag_did_not_send_ends_diag_the_same_way(tmp_path: Path, sig: int) -> None:
    """A parent sees death by the signal (not exit 128+N); diag dumps no core of its own."""
    elsewhere = tmp_path / "target-cwd"
    elsewhere.mkdir()
    code = ("import os, resource, signal\n"
            "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"  # the target's own core is not the point
            f"os.chdir({str(elsewhere)!r})\n"
            f"os.kill(os.getpid(), {int(sig)})\n")
    # --no-hooks: a recorder that flushed rows before the crash would make the run partial (store/loss.py)
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--no-hooks", "--", *py(code), cwd=tmp_path,
             preexec_fn=_no_core_limit)
    assert r.returncode == -sig, r.stderr
    assert not [p for p in os.listdir(tmp_path) if p.startswith("core")]  # diag's core dumps are off
    m = open_run(str(tmp_path / "run")).manifest
    assert (m["signal"], m["exit_code"], m["partial"]) == (sig, 128 + sig, False)


def test_stdio_passes_through_untouched(tmp_path: Path) -> None:
    payload = bytes(range(256)) * 40
    code = ("import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[::-1]);"
            "sys.stderr.write('to-stderr')")
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code), input=payload)
    assert r.returncode == 0
    assert r.stdout == payload[::-1]
    assert b"to-stderr" in r.stderr


def test_non_python_target_runs_and_says_why_hooks_are_missing(tmp_path: Path) -> None:
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", "sh", "-c", "echo hi; exit 5")
    assert r.returncode == 5 and r.stdout == b"hi\n"
    hooks = open_run(str(tmp_path / "run")).manifest["collectors"]["hooks"]
    assert hooks["status"] == "unavailable" and "Python" in hooks["reason"]


def test_sigterm_to_diag_is_forwarded(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = ("import signal, sys, time, pathlib\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(17))\n"
            f"pathlib.Path({str(ready)!r}).touch()\n"
            "time.sleep(30)\n")
    p = subprocess.Popen([*DIAG, "profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code)])
    _wait_for(ready)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 17


def test_sigint_to_diag_is_forwarded_once(tmp_path: Path) -> None:
    ready, count = tmp_path / "ready", tmp_path / "count"
    code = ("import signal, time, pathlib\n"
            "n = []\n"
            "signal.signal(signal.SIGINT, lambda *a: n.append(1))\n"
            f"pathlib.Path({str(ready)!r}).touch()\n"
            "t = time.time()\n"
            "while not n and time.time() - t < 20: time.sleep(0.01)\n"
            "time.sleep(0.5)\n"
            f"pathlib.Path({str(count)!r}).write_text(str(len(n)))\n")
    p = subprocess.Popen([*DIAG, "profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code)])
    _wait_for(ready)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 0
    assert count.read_text() == "1"


def test_duration_stops_gracefully_and_keeps_data(tmp_path: Path) -> None:
    """The duration ends while the target is still starting up (here: a user's sitecustomize that
    takes 1.5 s, as a cold import would): the SIGINT waits until the target runs its own code.
    Sent earlier, Python dies of it in `site` (a fatal error, exit 1) or loses it (rc 143 after SIGTERM)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os, time\n"
                                           "if os.environ.get('DIAG_RUN_DIR'): time.sleep(1.5)\n")
    code = ("import time\n"
            "try:\n"
            "    while True: time.sleep(0.05)\n"
            "except KeyboardInterrupt:\n"
            "    print('stopped cleanly')\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    t0 = time.monotonic()
    r = diag("profile", "--out", str(tmp_path / "run"), "--duration", "0.3", *FAST, "--", *py(code), env=env)
    assert time.monotonic() - t0 < 25
    assert r.returncode == 0 and b"stopped cleanly" in r.stdout, r.stderr
    run = open_run(str(tmp_path / "run"))
    assert run.manifest["stopped_by_duration"] is True
    assert run.manifest["duration_s"] < launcher.STARTUP_WAIT_S  # the bootstrap's row ended the wait
    assert not run.table("host").empty


def test_the_sigint_waits_for_the_start_up_at_most_startup_wait(monkeypatch) -> None:
    monkeypatch.setattr(launcher, "STARTUP_WAIT_S", 0.6)
    code = ("import time\n"
            "try:\n"
            "    time.sleep(30)\n"
            "except KeyboardInterrupt:\n"
            "    print(time.monotonic())\n")  # CLOCK_MONOTONIC: one clock for the whole host
    proc = subprocess.Popen(py(code), stdout=subprocess.PIPE)
    t0 = time.monotonic()
    out = launcher.wait(proc, duration_s=0.2, grace_s=0.3, started=lambda: False)
    assert out.stopped_by_duration and out.exit_code == 0
    assert float(proc.stdout.read()) - t0 >= 0.8  # the duration, then the whole start-up wait (never started)


def test_started_needs_the_bootstraps_row_from_a_python_root_only(tmp_path: Path) -> None:
    from diag.collect.profile import _started

    (tmp_path / "raw").mkdir()
    for argv, expected in (([sys.executable, "-c", "import time; time.sleep(5)"], False),
                           ([sys.executable, "-I", "-c", "import time; time.sleep(5)"], True),
                           (["sleep", "5"], True)):
        proc = subprocess.Popen(argv)
        try:
            started = _started(str(tmp_path), proc.pid)
            deadline = time.monotonic() + 5  # until the child's exec: it is this Python before that
            while started() is not expected and time.monotonic() < deadline:
                time.sleep(0.01)
            assert started() is expected, argv
            if not expected:
                (tmp_path / "raw" / f"meta.{proc.pid}.jsonl").write_text('{"ts_ns": 1, "startup_done": true}\n')
                assert _started(str(tmp_path), proc.pid)() is True
        finally:
            proc.kill()
            proc.wait()


def test_duration_escalates_to_sigkill(tmp_path: Path) -> None:
    code = ("import signal, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "time.sleep(60)\n")
    r = diag("profile", "--out", str(tmp_path / "run"), "--duration", "0.5", "--grace", "0.5", *FAST, "--", *py(code))
    assert r.returncode == 128 + signal.SIGKILL


def test_children_are_followed(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'import time; t=time.time()\\n"
            "while time.time()-t<1.5: pass']) for _ in range(2)]\n"
            "[k.wait() for k in kids]\n")
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code))
    assert r.returncode == 0
    run = open_run(str(tmp_path / "run"))
    assert run.table("host")["pid"].nunique() >= 3
    assert run.manifest["collectors"]["hooks"]["processes"] >= 3  # the bootstrap reached the children


def test_command_not_found_is_127_and_one_line(tmp_path: Path) -> None:
    r = diag("profile", "--out", str(tmp_path / "run"), "--", "no-such-program-xyz")
    assert r.returncode == 127
    assert r.stderr.decode().strip().count("\n") == 0 and "not found" in r.stderr.decode()
    assert not (tmp_path / "run").exists()


def test_no_command_is_an_error(tmp_path: Path) -> None:
    r = diag("profile", "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"no command" in r.stderr


def test_non_empty_out_is_refused_and_untouched(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = diag("profile", "--out", str(out), "--", *py("pass"))
    assert r.returncode != 0 and b"not empty" in r.stderr and b"Traceback" not in r.stderr
    assert os.listdir(out) == ["keep.txt"]


def test_unwritable_out_is_refused(tmp_path: Path) -> None:
    r = diag("profile", "--out", "/proc/diag-run", "--", *py("pass"))
    assert r.returncode != 0 and b"Traceback" not in r.stderr
    assert len(r.stderr.decode().strip().splitlines()) == 1


def test_sigkill_of_diag_leaves_a_readable_partial_run(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = ("import pathlib, time\n"
            "import diag\n"
            "for i in range(1000):\n"
            "    with diag.stage('work'):\n"
            "        time.sleep(0.01)\n"
            f"    if i == 20: pathlib.Path({str(ready)!r}).touch()\n")
    p = subprocess.Popen([*DIAG, "profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code)],
                         start_new_session=True)
    _wait_for(ready)
    time.sleep(0.8)
    os.killpg(p.pid, signal.SIGKILL)  # diag and the target, at once
    p.wait(timeout=10)
    run = open_run(str(tmp_path / "run"))
    assert run.partial
    assert len(run.table("ranges")) >= 20
    assert not run.table("host").empty
    assert run.duration_s > 0


def _wait_for(path: Path, timeout: float = 30) -> None:
    t = time.monotonic()
    while not path.exists():
        assert time.monotonic() - t < timeout, f"{path} never appeared"
        time.sleep(0.05)


def test_ctrl_c_at_a_terminal_reaches_the_target_once(tmp_path: Path) -> None:
    """The tty sends SIGINT to the whole foreground group: diag must not send it again."""
    import pty

    ready, count = tmp_path / "ready", tmp_path / "count"
    code = ("import signal, time, pathlib\n"
            "n = []\n"
            "signal.signal(signal.SIGINT, lambda *a: n.append(1))\n"
            f"pathlib.Path({str(ready)!r}).touch()\n"
            "t = time.time()\n"
            "while not n and time.time() - t < 20: time.sleep(0.01)\n"
            "time.sleep(0.5)\n"
            f"pathlib.Path({str(count)!r}).write_text(str(len(n)))\n")
    pid, fd = pty.fork()
    if pid == 0:  # child: diag in a fresh session whose controlling terminal is the pty
        os.execv(sys.executable, [*DIAG, "profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code)])
    try:
        _wait_for(ready)
        os.write(fd, b"\x03")  # Ctrl-C typed at the terminal
        _wait_for(count)
        assert count.read_text() == "1"
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)


def test_diags_own_failure_does_not_change_the_target(tmp_path: Path, monkeypatch) -> None:
    """A sampler that blows up, and a run directory that cannot be sealed: the target's exit code stands."""
    from diag.collect import profile

    def broken(_opts):  # noqa: ANN001, ANN202
        raise RuntimeError("sampler exploded")

    def unsealable(_run_dir, _manifest):  # noqa: ANN001, ANN202
        raise OSError("disk full")

    monkeypatch.setattr(profile, "_samplers", broken)
    monkeypatch.setattr(profile, "_seal", unsealable)
    rec = profile.record(py("raise SystemExit(7)"), profile.ProfileOptions(out=str(tmp_path / "run"), stacks=False))
    assert rec.exit_code == 7
    assert open_run(str(tmp_path / "run")).partial  # still readable, flagged partial


@pytest.mark.parametrize("sig", [signal.SIGALRM, signal.SIGUSR2, signal.SIGWINCH, signal.SIGPROF, signal.SIGRTMIN])
def test_other_signals_to_diag_reach_the_target(tmp_path: Path, sig: int) -> None:
    """`kill -ALRM <diag>` (and the like) neither kills diag nor leaves the target running unaware."""
    ready = tmp_path / "ready"
    code = ("import signal, sys, time, pathlib\n"
            f"signal.signal({int(sig)}, lambda *a: sys.exit(23))\n"
            f"pathlib.Path({str(ready)!r}).touch()\n"
            "time.sleep(20)\n"
            "sys.exit(1)\n")
    p = subprocess.Popen([*DIAG, "profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code)])
    _wait_for(ready)
    p.send_signal(sig)
    assert p.wait(timeout=30) == 23
    assert open_run(str(tmp_path / "run")).partial is False


def test_a_forwarded_signal_that_kills_the_target_is_128_plus_n(tmp_path: Path) -> None:
    """diag sent it (forwarded): diag itself stays alive and says so in its exit status, as for --duration."""
    ready = tmp_path / "ready"
    code = f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(20)\n"
    p = subprocess.Popen([*DIAG, "profile", "--out", str(tmp_path / "run"), *FAST, "--", *py(code)])
    _wait_for(ready)
    p.send_signal(signal.SIGALRM)
    assert p.wait(timeout=30) == 128 + signal.SIGALRM
    assert open_run(str(tmp_path / "run")).manifest["signal"] == signal.SIGALRM
