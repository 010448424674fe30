"""Runs the target: stdio untouched, signals forwarded, exit code returned.

Signals are taken synchronously (blocked, then `sigtimedwait`) so we can tell
who sent them: a Ctrl-C typed at the terminal already reached the target,
which shares our process group, so it is not sent twice; a signal sent to
diag alone (kill, timeout, a supervisor) is forwarded.

The target starts with the signals unblocked again. Any other process diag
starts after `block_signals()` must do the same (`unblock_in_child`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SI_KERNEL = 0x80  # siginfo si_code of a signal the tty driver sent


def block_signals() -> None:
    """Block forwarded signals in this thread and every thread started later."""
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)


def unblock_in_child() -> None:
    """preexec_fn for child processes: give them the normal signal mask back."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)


@dataclass
class Outcome:
    exit_code: int  # the target's, or 128+N when it died of signal N
    signal: int | None  # the signal that ended it, if any
    stopped_by_duration: bool


def start(cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the target in our process group, inheriting stdin/stdout/stderr."""
    return subprocess.Popen(list(cmd), env=env, preexec_fn=unblock_in_child)  # noqa: PLW1509 - no threads yet


def wait(
    proc: subprocess.Popen[bytes],
    duration_s: float | None = None,
    grace_s: float = 5.0,
    on_tick: Callable[[], None] | None = None,
) -> Outcome:
    """Wait for the target, forwarding signals; stop it gracefully after `duration_s`.

    The graceful stop sends SIGINT, then SIGTERM after `grace_s`, then SIGKILL
    to the target and its descendants after another `grace_s`.
    """
    deadline = time.monotonic() + duration_s if duration_s else None
    stop_stage, next_stage_at = 0, 0.0
    while proc.poll() is None:
        info = signal.sigtimedwait(FORWARDED, 0.05)
        if info is not None and not (info.si_signo == signal.SIGINT and info.si_code == SI_KERNEL):
            _send(proc, info.si_signo)
        now = time.monotonic()
        if deadline is not None and now >= deadline and now >= next_stage_at:
            if stop_stage == 0:
                _send(proc, signal.SIGINT)
            elif stop_stage == 1:
                _send(proc, signal.SIGTERM)
            else:
                kill_tree(proc.pid)
            stop_stage += 1
            next_stage_at = now + grace_s
        if on_tick is not None:
            on_tick()
    rc = proc.returncode
    if rc < 0:
        return Outcome(128 - rc, -rc, deadline is not None and stop_stage > 0)
    return Outcome(rc, None, deadline is not None and stop_stage > 0)


def _send(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def find_command(cmd: Sequence[str]) -> str | None:
    """The executable that `cmd` would run, or None if there is none."""
    import shutil

    prog = cmd[0]
    if os.sep in prog:
        return prog if os.path.isfile(prog) else None
    return shutil.which(prog)
