"""Runs the target: stdio untouched, signals forwarded, exit code returned.

Signals are taken synchronously (blocked, then `sigtimedwait`) so we can tell
who sent them: a Ctrl-C (or Ctrl-\\, or a window resize) at the terminal
already reached the target, which shares our process group, so it is not sent
twice; a signal sent to diag alone (kill, timeout, a supervisor) is forwarded.
Every catchable signal whose default would end diag is forwarded (SIGALRM,
SIGUSR1, real-time signals...): none leaves the target running unaware. Left
alone: job control (Ctrl-Z stops the whole group, SIGCONT resumes it), SIGCHLD,
SIGPIPE, and the signals of diag's own faults and limits.

How diag ends (`Outcome`, `end_like_target`): with the target's exit code; when
the target died of a signal diag had no part in (a segfault, the OOM killer,
a kill aimed at the target), diag dies of the same signal after its cleanup,
without a core dump, so a parent sees what happened; when diag sent it (a
forwarded signal, `--duration`, Ctrl-C) the exit status is 128+N.

The target starts with the signals unblocked again. Any other process diag
starts after `block_signals()` must do the same (`unblock_in_child`).

The whole tree (`Tree`): a launcher such as torchrun starts its ranks in
sessions of their own, and a rank whose parent died is reparented away. So
diag remembers every descendant it has seen (every 0.25 s). When diag stops
the target (`--duration`, a forwarded signal), SIGTERM and SIGKILL go to
every remembered descendant too, not only the root. When the root exits,
diag waits at most `grace_s` for the rest of the tree (their last rows), and
then, only if diag was stopping the job, escalates on them (SIGTERM, then
SIGKILL after another `grace_s`); otherwise it leaves them running and says
so (`Outcome.outlived`, run.json `outlived_pids`). Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_FORWARDED_NAMES = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM",
                    "SIGPROF", "SIGIO", "SIGPWR", "SIGSTKFLT", "SIGWINCH")
FORWARDED = tuple(sorted({getattr(signal, n) for n in _FORWARDED_NAMES if hasattr(signal, n)}
                         | set(range(signal.SIGRTMIN, signal.SIGRTMAX + 1))))
SI_KERNEL = 0x80  # siginfo si_code of a signal the kernel sent (the tty driver: to the whole foreground group)
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # forwarded: the job is being stopped
FROM_TTY = (signal.SIGINT, signal.SIGQUIT, signal.SIGWINCH)  # sent to the group by the terminal
STARTUP_WAIT_S = 10.0  # a cold start (first import, no bytecode cache, a loaded host) takes seconds


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
    reraise: int | None = None  # `signal`, when diag had no part in it: diag ends by it too
    outlived: list[int] = field(default_factory=list)  # descendants still running when diag returned


class Tree:
    """The target's descendants, remembered as they are seen (psutil; pid reuse is checked by psutil)."""

    def __init__(self, root_pid: int, every_s: float = 0.25) -> None:
        self.root_pid = root_pid
        self.every_s = every_s
        self.known: dict[int, Any] = {}
        self._next = 0.0

    def refresh(self, now: float | None = None, force: bool = False) -> None:
        """Add the root's current descendants (at most every `every_s`)."""
        now = time.monotonic() if now is None else now
        if not force and now < self._next:
            return
        self._next = now + self.every_s
        import psutil

        try:
            for p in psutil.Process(self.root_pid).children(recursive=True):
                self.known.setdefault(p.pid, p)
        except psutil.Error:
            pass

    def alive(self) -> list[Any]:
        """Remembered descendants still running (zombies are done)."""
        import psutil

        out = []
        for p in self.known.values():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                pass
        return out

    def signal(self, sig: int) -> None:
        """Send `sig` to every remembered descendant still running."""
        import psutil

        for p in self.alive():
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass


def start(cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the target in our process group, inheriting stdin/stdout/stderr."""
    return subprocess.Popen(list(cmd), env=env, preexec_fn=unblock_in_child)  # noqa: PLW1509 - no threads yet


def wait(
    proc: subprocess.Popen[bytes],
    duration_s: float | None = None,
    grace_s: float = 5.0,
    on_tick: Callable[[], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
    started: Callable[[], bool] | None = None,
) -> Outcome:
    """Wait for the target, forwarding signals; stop it gracefully after `duration_s`.

    The graceful stop sends SIGINT, then SIGTERM after `grace_s`, then SIGKILL
    to the target and its descendants after another `grace_s`. `stop_when()`
    returning True starts the same graceful stop (`diag profile --load`: the load ended).
    `started()` (optional) says whether the target runs its own code yet: the SIGINT
    waits for it, at most STARTUP_WAIT_S (or `grace_s` if longer). A SIGINT that reaches Python during its start-up
    ends it with a fatal error, or is lost (a KeyboardInterrupt raised in an import
    lock's weakref callback is only printed), and only SIGTERM would stop the target.
    """
    deadline = time.monotonic() + duration_s if duration_s else None
    stop_stage, next_stage_at = 0, 0.0
    ours: set[int] = set()  # signals diag sent (or that reached the target from the terminal, as Ctrl-C)
    tree = Tree(proc.pid)
    while proc.poll() is None:
        info = signal.sigtimedwait(FORWARDED, 0.05)
        if info is not None:
            ours.add(info.si_signo)
            if not (info.si_signo in FROM_TTY and info.si_code == SI_KERNEL):
                _send(proc, info.si_signo)
        now = time.monotonic()
        tree.refresh(now)
        if stop_when is not None and (deadline is None or now < deadline) and stop_when():
            deadline = now
        starting = stop_stage == 0 and started is not None and deadline is not None \
            and deadline <= now < deadline + max(grace_s, STARTUP_WAIT_S) and not started()  # the SIGINT goes once its own code runs
        if deadline is not None and now >= deadline and now >= next_stage_at and not starting:
            if stop_stage == 0:
                _send(proc, signal.SIGINT)
            elif stop_stage == 1:
                _send(proc, signal.SIGTERM)
                tree.signal(signal.SIGTERM)  # ranks in sessions of their own, a launcher that is stuck
            else:
                tree.refresh(force=True)
                kill_tree(proc.pid)
                tree.signal(signal.SIGKILL)
            stop_stage += 1
            next_stage_at = now + grace_s
        if on_tick is not None:
            on_tick()
    stopping = (deadline is not None and stop_stage > 0) or bool(ours & set(STOPPING))
    outlived = wait_for_tree(tree, grace_s, escalate=stopping, on_tick=on_tick)
    while signal.sigtimedwait(FORWARDED, 0) is not None:
        pass  # arrived once the target had gone: nobody to pass them to, and they must not end diag later
    rc = proc.returncode
    stopped = deadline is not None and stop_stage > 0
    if rc < 0:
        return Outcome(128 - rc, -rc, stopped, None if stopped or -rc in ours else -rc, outlived)
    return Outcome(rc, None, stopped, None, outlived)


def wait_for_tree(tree: Tree, grace_s: float, escalate: bool,
                  on_tick: Callable[[], None] | None = None) -> list[int]:
    """After the root exited: wait at most `grace_s` for its remembered descendants; when diag was
    stopping the job, then SIGTERM them and SIGKILL after another `grace_s`. Returns those left running."""
    stages = [None, signal.SIGTERM, signal.SIGKILL] if escalate else [None]
    for sig in stages:
        if sig is not None:
            tree.signal(sig)
        end = time.monotonic() + (grace_s if sig != signal.SIGKILL else min(grace_s, 2.0))
        while tree.alive() and time.monotonic() < end:
            info = signal.sigtimedwait(FORWARDED, 0.05)
            if info is not None and not (info.si_signo in FROM_TTY and info.si_code == SI_KERNEL):
                tree.signal(info.si_signo)  # the root is gone: the rest of the job gets it
            if on_tick is not None:
                on_tick()
        if not tree.alive():
            return []
    return sorted(p.pid for p in tree.alive())


def end_like_target(sig: int) -> int:
    """Die of `sig`, as the target did, without a core dump; returns 128+sig only if still alive.

    Call it last, after diag's own cleanup and output: nothing runs after it.
    """
    import resource

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    except (OSError, ValueError):
        pass
    return 128 + sig


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
