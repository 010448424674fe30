"""Stack sampler: py-spy as a subprocess attached to the target.

py-spy records the Python stacks of the target and its subprocesses into
RUN/raw/pyspy.<start_ns>.json (chrometrace: timestamps in µs relative to
py-spy's own start, which the file name pins to the shared clock). Its own
output goes to RUN/raw/pyspy.log, never to the user's terminal.

Bounded: py-spy keeps every sample in memory until it stops, and its trace
grows by about 0.5 GB an hour per busy thread. So every `rotate_s` the
running py-spy is stopped (it writes its segment) and a new one attached; a
niced subprocess compacts the finished segment into a Parquet file of stack
intervals (`python -m diag.store.pyspy compact`) and deletes the JSON.

Adaptive rate: py-spy's CPU comes out of the target when the target fills
every core of a small host (~6% of a 2-core box at 50 Hz). Unless the user
set `--stack-rate`, the watcher reads the machine's idle CPU (/proc/stat
through psutil, once a second, judged over the last second: the signal of
diag/collect/cpu_load.py, which the host sampler follows too) and, on a host
of at most SMALL_HOST_CORES cores with no core to spare, restarts py-spy at
SATURATED_RATE_HZ (py-spy's rate is fixed per process); it goes back up once
a core is free again, no sooner than RAISE_AFTER_S after a change.
Spare CPU on average is not enough, though: each py-spy sample takes a
core for a moment, and a target whose threads run in parallel bursts (torch
intra-op threads) waits for the one py-spy preempted. py-spy's cost per
sample grows with the target's threads (a server that starts a thread per
request: ~3 ms of CPU a sample, 17% of a core at 50 Hz, 13-20% of its
throughput on 2 cores). So on a small host py-spy also keeps to a CPU
budget, OWN_BUDGET_SHARE of the host: past it, its rate is scaled down to
fit (20 Hz, then 10 Hz). Each change is a segment boundary,
bounded in number, and recorded in run.json (`collectors.stacks.rates`).
The analysis reads stack time shares (interval durations), not sample
counts, so a lower rate keeps its measures.

Subprocesses: py-spy's `--subprocesses` roughly doubles its CPU at a low
rate (it keeps scanning for new children), so it is asked for only once the
target has a child process: at the start (a launcher, gunicorn, torchrun) or
as soon as one appears (DataLoader workers; checked once a second), which
restarts py-spy with it (`collectors.stacks.subprocesses_at_s`).

Never holds a rank: py-spy runs `--nonblocking` (it reads the target's memory
without ptrace-stopping it, so a rank in a collective is never paused while
its peers wait) and without `--native` (native unwinding needs the stop).
At the end it gets SIGINT, `stop_timeout_s` to write its file, then SIGKILL
and at most 5 s more: its stop is bounded (tests/test_multi_rank_exit.py).

py-spy gives up after about a second when it finds no Python process. A
target started through a shell script may run Python only later, so while the
root process lives, attaching is retried with a growing delay.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

import psutil

from diag.collect.cpu_load import FREE_SPARE_CORES, SATURATED_SPARE_CORES, SMALL_HOST_CORES, IdleCpu
from diag.collect.launcher import unblock_in_child
from diag.collect.redact import redact_pyspy_file
from diag.collect.sampler import FAILED, OK, UNAVAILABLE, SamplerBase, Unavailable, idle_priority
from diag.store.jsonl import RAW_DIR

LOG_FILE = "pyspy.log"
# py-spy's messages when the target (still) runs no Python
_NO_PYTHON = ("No python processes found", "Failed to find python version")
_RETRY_MAX_S = 10.0

SATURATED_RATE_HZ = 10  # py-spy's rate while a small host has no core to spare
OWN_WINDOW_S = 3.0  # py-spy's own CPU is judged over this long (a restart's attach would skew less)
RAISE_AFTER_S = 20.0  # no raise sooner than this after a change (each restart costs an attach)
MAX_RATE_CHANGES = 4  # restarts for the rate, at most, per run
OWN_BUDGET_SHARE = 0.02  # on a small host, py-spy's own CPU at most this share of all cores
BUDGET_RATES_HZ = (20, SATURATED_RATE_HZ)  # the rates py-spy steps down to for its budget


def choose_rate(cores: int, spare_cores: float, base_hz: int, current_hz: int,
                own_cores: float | None = None) -> tuple[int, str | None]:
    """The py-spy rate for a host of `cores` with `spare_cores` idle and py-spy itself using
    `own_cores` (both over OWN_WINDOW_S; own_cores None: not known yet).

    Returns (rate, why); why is None when the rate stays as it is.
    """
    if cores > SMALL_HOST_CORES or base_hz <= SATURATED_RATE_HZ:
        return current_hz, None
    if spare_cores < SATURATED_SPARE_CORES and current_hz != SATURATED_RATE_HZ:
        return SATURATED_RATE_HZ, (f"{spare_cores:.2f} of {cores} cores idle: py-spy's CPU would come out of "
                                   f"the target, so {SATURATED_RATE_HZ} Hz")
    budget = OWN_BUDGET_SHARE * cores
    if own_cores is not None and own_cores > budget and current_hz > SATURATED_RATE_HZ:
        fit = current_hz * budget / own_cores
        # the next rung down that fits: each change restarts py-spy, so few and large steps
        rate = max((r for r in BUDGET_RATES_HZ if r <= fit and r < current_hz), default=SATURATED_RATE_HZ)
        if rate < current_hz:
            return rate, (f"py-spy used {own_cores:.3f} cores, over its budget of {budget:.3f} "
                          f"({OWN_BUDGET_SHARE:.0%} of {cores} cores): {rate} Hz")
    # back to the base rate with a core free, unless py-spy there would be over its budget again
    fits = own_cores is None or own_cores * base_hz / max(1, current_hz) <= budget
    if spare_cores >= FREE_SPARE_CORES and current_hz != base_hz and fits:
        return base_hz, f"{spare_cores:.2f} of {cores} cores idle again: back to {base_hz} Hz"
    return current_hz, None


def find_py_spy() -> str | None:
    """py-spy next to the running interpreter (a venv's bin/) or on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")


def _error_line(log_path: str, offset: int = 0) -> str:
    """py-spy's first error line (without "Error: ") after offset, else its first line."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read(64 * 1024).decode(errors="replace")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    except OSError:
        return "py-spy exited"
    for ln in lines:
        if ln.startswith("Error:"):
            return ln[len("Error:"):].strip()
    return lines[0] if lines else "py-spy exited"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (exited, not yet reaped by the launcher) is not a target to attach to
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:][:1] != b"Z"
    except (OSError, ValueError):
        return True


def _pyspy_child() -> None:
    """preexec_fn for py-spy at idle priority: normal signals, SCHED_IDLE (sampler.idle_priority)."""
    unblock_in_child()
    idle_priority()


def _policy(pid: int) -> str:
    """"idle" when the process runs under SCHED_IDLE, else "normal"; "" when it cannot be read."""
    try:
        return "idle" if os.sched_getscheduler(pid) == getattr(os, "SCHED_IDLE", -1) else "normal"
    except (OSError, AttributeError):
        return ""


def _nice_child() -> None:
    """preexec_fn for the compactor: normal signals, lowest CPU priority (idle where the system has it)."""
    unblock_in_child()
    if not idle_priority():
        os.nice(19)


class StackSampler(SamplerBase):
    """Runs `py-spy record` against the target's process tree."""

    name = "stacks"
    redact = True  # py-spy names processes by their command lines: hide secrets (profile.py: --no-redact)

    def __init__(self, rate_hz: int = 100, py_spy: str | None = None, stop_timeout_s: float = 20.0,
                 rotate_s: float = 300.0, adaptive: bool = False, load: IdleCpu | None = None) -> None:
        super().__init__()
        self.rate_hz = rate_hz  # the base rate; `_rate_now` is what py-spy runs at
        self._rate_now = rate_hz
        self.adaptive = adaptive
        self._load = load or (IdleCpu() if adaptive else None)
        self._rates: list[dict[str, Any]] = []  # rate changes, for run.json
        self._t0 = time.monotonic()
        self._changed_at = 0.0
        self._next_load_read = 0.0
        self.rotate_s = rotate_s
        self._segment_t0 = 0.0
        self._segments = 0
        self._py_spy = py_spy
        self._stop_timeout = stop_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._attempts = 0
        self._found: dict[str, Any] | None = None  # what an attempt that found no Python said (_watch)
        self._priority = ""  # py-spy's CPU priority ("idle", "normal"), read back after each start
        self._start_ns: int | None = None
        self._log_pos = 0
        self._cpu_done = 0.0  # CPU seconds of earlier py-spy attempts
        self._cpu_cur = 0.0  # of the running one, last reading
        self._own: deque[tuple[float, float]] = deque()  # (time, py-spy's CPU s so far), the last OWN_WINDOW_S
        self._children = False  # py-spy follows subprocesses (the target has had a child)
        self._children_at: float | None = None  # when that started, seconds into the run
        self._next_children_check = 0.0

    # -- Sampler interface ---------------------------------------------------

    def _start(self, run_dir: str, root_pid: int) -> None:
        exe = self._py_spy or find_py_spy()
        if exe is None:
            raise Unavailable("py-spy not installed")
        self._exe, self._pid = exe, root_pid
        raw = os.path.join(run_dir, RAW_DIR)
        os.makedirs(raw, exist_ok=True)
        self._raw = raw
        self._log = os.path.join(raw, LOG_FILE)
        self._t0 = time.monotonic()
        if self.adaptive and self._load is not None:
            cores = self._load.cores
            plan = (f"{SATURATED_RATE_HZ} Hz while no core is idle, and py-spy within "
                    f"{OWN_BUDGET_SHARE:.0%} of the host's CPU" if cores <= SMALL_HOST_CORES
                    else f"kept (more than {SMALL_HOST_CORES} cores)")
            self._rates.append({"at_s": 0.0, "rate_hz": self.rate_hz, "why": f"start: {cores} cores; {plan}"})
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="diag-stacks", daemon=True)
        self._watcher.start()

    def _stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join(5.0)
        with self._lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            self._redact(getattr(self, "_out", None))
            self._settle()
            return
        self._measure(proc)
        if not self._interrupt(proc):
            self._status = {"status": FAILED, "reason": "py-spy did not finish writing its output in time"}
            self._redact(self._out)
            return
        self._redact(self._out)
        self._settle()

    def extra_status(self) -> dict[str, Any]:
        st: dict[str, Any] = {"rate_hz": self.rate_hz}
        if self._priority:
            st["priority"] = self._priority
        if self.adaptive:
            st["adaptive"] = True
            st["rates"] = list(self._rates)
        if self._start_ns is not None:
            st["start_ns"] = self._start_ns
        if self._attempts > 1:
            st["attempts"] = self._attempts
        if self._segments:
            st["segments"] = self._segments + 1
        if self._children_at is not None:
            st["subprocesses_at_s"] = self._children_at
        return st

    def own_cpu_s(self) -> float | None:
        return (self._cpu_done + self._cpu_cur) or None

    # -- internals -------------------------------------------------------------

    def _spawn(self) -> None:
        if not self._children and self._has_children():
            self._children, self._children_at = True, round(time.monotonic() - self._t0, 1)
        self._own.clear()  # each py-spy (rate, subprocesses) has its own cost: measured afresh
        start_ns = time.time_ns()  # py-spy's trace timestamps count from about here
        self._out = os.path.join(self._raw, f"pyspy.{start_ns}.json")
        cmd = [self._exe, "record", "--pid", str(self._pid), *(["--subprocesses"] if self._children else []),
               "--nonblocking", "--idle", "-r", str(self._rate_now), "-f", "chrometrace", "-o", self._out]
        with open(self._log, "ab") as log:
            self._log_pos = log.tell()  # this attempt's messages start here
            # Own session: a Ctrl-C at the terminal must not stop it before the target.
            # Signals are unblocked: diag blocks them in its own threads (launcher.py).
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True, close_fds=True,
                                    preexec_fn=_pyspy_child if self.idle else unblock_in_child)
        self._priority = _policy(proc.pid)
        with self._lock:
            self._proc = proc
            self._start_ns = self._start_ns or start_ns
            self._segment_t0 = time.monotonic()
            self._attempts += 1
            self._status = {"status": OK}

    def _rotate(self, proc: subprocess.Popen[bytes], compact: bool = True) -> None:
        """Stop the running py-spy (it writes its segment), compact that, attach a new one.

        compact=False leaves a short segment as JSON (the reader takes both): on a
        saturated host a niced compactor could still be running when the run ends.
        """
        done = self._out
        self._interrupt(proc)
        self._measure(proc)
        self._retire()
        self._segments += 1
        self._redact(done)  # before the compactor reads it
        if compact and os.path.exists(done):
            with open(self._log, "ab") as log:
                subprocess.Popen([sys.executable, "-m", "diag.store.pyspy", "compact", done],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                 preexec_fn=_nice_child)
        if _alive(self._pid):
            self._spawn()

    def _redact(self, path: str | None) -> None:
        """Rewrite a finished py-spy file without secrets; if that fails, remove it (never keep one)."""
        if not self.redact or not path or not os.path.exists(path):
            return
        try:
            redact_pyspy_file(path)
        except OSError:
            try:
                os.unlink(path)
            except OSError:
                pass

    def _interrupt(self, proc: subprocess.Popen[bytes]) -> bool:
        """Stop py-spy so that it writes its file; kill it if it takes too long (then False)."""
        # SIGINT makes py-spy write its file; it runs in its own session, so a
        # Ctrl-C in the terminal does not reach it before we ask
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(self._stop_timeout)
            return True
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(5.0)  # SIGKILL ends it unless it is stuck in the kernel: never wait forever
            except subprocess.TimeoutExpired:
                pass
            return False

    def _watch(self) -> None:
        """Notice py-spy exiting early; retry while the target may still start Python."""
        if self.idle:
            idle_priority()
        delay = 1.0
        while not self._stopping.wait(0.2):
            with self._lock:
                proc = self._proc
            if proc is None:
                continue
            if proc.poll() is None:
                self._measure(proc)
                if self._child_appeared():
                    self._rotate(proc, compact=False)  # the new py-spy follows subprocesses (_spawn)
                    continue
                if self.adaptive and self._adapt(proc):
                    continue
                if self.rotate_s and time.monotonic() - self._segment_t0 >= self.rotate_s:
                    self._rotate(proc)
                continue
            if os.path.exists(self._out):  # py-spy ended with the target and wrote its trace
                self._settle()
                return
            reason = _error_line(self._log, self._log_pos)
            if self._found is not None and not _alive(self._pid):  # it ended during a retry: that finding stands
                self._status = self._found
                self._retire()
                return
            if not any(s in reason for s in _NO_PYTHON):  # e.g. ptrace refused: retrying will not help
                self._status = {"status": UNAVAILABLE, "reason": f"py-spy: {reason}"}
                self._retire()
                return
            self._status = self._found = {"status": UNAVAILABLE,
                                          "reason": f"no Python process in the target (py-spy: {reason})"}
            self._retire()
            if self._stopping.wait(delay) or not _alive(self._pid):
                return
            delay = min(delay * 2, _RETRY_MAX_S)
            self._spawn()

    def _adapt(self, proc: subprocess.Popen[bytes]) -> bool:
        """Read the idle CPU (once a second); restart py-spy at another rate if it should change."""
        now = time.monotonic()
        if self._load is None or now < self._next_load_read or len(self._rates) > MAX_RATE_CHANGES:
            return False
        self._next_load_read = now + 1.0
        try:
            self._load.read(now)
        except (psutil.Error, OSError):
            return False
        own = self._own_cores(now)
        spare = self._load.spare_cores()
        if spare is None:
            return False
        rate, why = choose_rate(self._load.cores, spare, self.rate_hz, self._rate_now, own)
        if why is None or (rate > self._rate_now and now - self._changed_at < RAISE_AFTER_S):
            return False
        self._rate_now, self._changed_at = rate, now
        change: dict[str, Any] = {"at_s": round(now - self._t0, 1), "rate_hz": rate, "spare_cores": round(spare, 2)}
        if own is not None:
            change["pyspy_cores"] = round(own, 3)
        self._rates.append({**change, "why": why})
        self._rotate(proc, compact=False)
        return True

    def _has_children(self) -> bool:
        try:
            return bool(psutil.Process(self._pid).children())
        except psutil.NoSuchProcess:
            return False
        except psutil.Error:
            return True  # cannot tell: follow subprocesses, as before

    def _child_appeared(self) -> bool:
        """True once the target has a child while py-spy does not follow subprocesses (once a second)."""
        now = time.monotonic()
        if self._children or now < self._next_children_check:
            return False
        self._next_children_check = now + 1.0
        return self._has_children()

    def _own_cores(self, now: float) -> float | None:
        """py-spy's own CPU, in cores, over the last OWN_WINDOW_S at the current rate (None until then)."""
        self._own.append((now, self._cpu_done + self._cpu_cur))
        while len(self._own) > 2 and now - self._own[1][0] >= OWN_WINDOW_S:
            self._own.popleft()
        (t0, c0), (t1, c1) = self._own[0], self._own[-1]
        return (c1 - c0) / (t1 - t0) if t1 - t0 >= OWN_WINDOW_S else None

    def _settle(self) -> None:
        """Final status once py-spy has exited."""
        with self._lock:
            proc = self._proc
        if proc is None:
            return  # never attached: the status already says why
        if self._segments or (os.path.exists(self._out) and os.path.getsize(self._out) > 0):
            self._status = {"status": OK}
            return
        reason = _error_line(self._log, self._log_pos)
        if any(s in reason for s in _NO_PYTHON):
            self._status = {"status": UNAVAILABLE, "reason": f"no Python process in the target (py-spy: {reason})"}
        else:
            self._status = {"status": FAILED, "reason": f"py-spy wrote no trace: {reason}"}

    def _measure(self, proc: subprocess.Popen[bytes]) -> None:
        """Keep py-spy's CPU seconds up to date (its own overhead, for status())."""
        try:
            t = psutil.Process(proc.pid).cpu_times()
            self._cpu_cur = t.user + t.system
        except psutil.Error:
            pass  # exited: keep the last reading

    def _retire(self) -> None:
        with self._lock:
            self._proc = None
            self._cpu_done += self._cpu_cur
            self._cpu_cur = 0.0
