"""Host sampler: psutil over the whole process tree of the target.

Writes three tables (docs/run-format.md): `host` (one row per process per
tick), `threads` (per thread: cumulative CPU seconds) and `system` (the whole
machine). Children are re-discovered every tick, because multiprocessing
workers and subprocesses come and go.

Adaptive interval: a tick costs about a millisecond of CPU on a busy host
(psutil reads every process's and thread's /proc files), which on a small
host whose cores the target fills comes out of the target. Unless the user
set `--host-interval`, the sampler ticks every SATURATED_INTERVAL_S instead
of DEFAULT_INTERVAL_S while the host is saturated (diag/collect/cpu_load.py,
judged from the /proc/stat reading each tick takes anyway), and goes back
once a core is free. The analysis weighs rows by their timestamps, never by
their count, so its measures keep their meaning; every change is in run.json
(`collectors.host.intervals`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import psutil

from diag.collect.cpu_load import SMALL_HOST_CORES, IdleCpu, idle_seconds, saturated
from diag.collect.sampler import PeriodicSampler, Unavailable

PROC = "/proc"
DEFAULT_INTERVAL_S = 0.1
SATURATED_INTERVAL_S = 0.5  # while a small host has no core to spare
MAX_INTERVAL_CHANGES = 40  # changes listed in run.json, at most (the rest are counted)


def _read_ppid(pid: int) -> int | None:
    """Parent pid from /proc/PID/stat (None if the process is gone)."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
        # the name (field 2) may hold spaces and parentheses: parse after the last ')'
        return int(data[data.rindex(b")") + 2:].split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return None


class ProcessTree:
    """The set of live processes descending from a root pid.

    On Linux each tick lists /proc and reads the stat file of new pids only,
    so the cost stays small on hosts with thousands of processes (psutil's
    children(recursive=True) reads every process's stat every time).
    Once a process is in the tree it stays until it dies, even if it is
    re-parented to init (a daemonized grandchild is still the target's work).
    """

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.members: set[int] = {root_pid}
        self._ppid: dict[int, int] = {}  # every pid on the machine seen so far -> ppid
        self._linux = os.path.isdir(f"{PROC}/self")

    def scan(self) -> set[int]:
        """Return the live members now."""
        if not self._linux:
            return self._scan_psutil()
        try:
            pids = {int(n) for n in os.listdir(PROC) if n.isdigit()}
        except OSError:
            return self._scan_psutil()
        for pid in self._ppid.keys() - pids:
            del self._ppid[pid]
        new = pids - self._ppid.keys()
        for pid in new:
            ppid = _read_ppid(pid)
            if ppid is not None:
                self._ppid[pid] = ppid
        members = self.members & pids
        # only new pids can join: an old pid's parent does not change (except to init)
        verdict: dict[int, bool] = {}

        def joins(pid: int) -> bool:
            chain = []
            while pid not in verdict:
                if pid in members:
                    verdict[pid] = True
                    break
                if pid not in new or pid not in self._ppid:
                    verdict[pid] = False
                    break
                chain.append(pid)
                pid = self._ppid[pid]
                if len(chain) > 4096:  # a cycle can only come from pid reuse mid-scan
                    verdict[pid] = False
                    break
            for p in chain:
                verdict[p] = verdict[pid]
            return verdict[pid]

        members |= {pid for pid in new if joins(pid)}
        self.members = members
        return members

    def _scan_psutil(self) -> set[int]:
        try:
            root = psutil.Process(self.root_pid)
            kids = {c.pid for c in root.children(recursive=True)}
            self.members = {p for p in self.members if psutil.pid_exists(p)} | kids | {self.root_pid}
        except psutil.Error:
            self.members = {p for p in self.members if psutil.pid_exists(p)}
        return self.members


def _run_delay_s(pid: int, tid: int) -> float | None:
    """Cumulative seconds the thread waited for a CPU while runnable (Linux schedstat).

    This tells a thread starved of CPU by other load apart from one blocked on
    I/O: both use little CPU, only the first waits on the run queue.
    """
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _get(fn: Callable[[], Any]) -> Any:
    """One psutil reading; None where the OS refuses it (AccessDenied, unsupported)."""
    try:
        return fn()
    except (psutil.AccessDenied, NotImplementedError, AttributeError, OSError):
        return None


class HostSampler(PeriodicSampler):
    """Samples CPU, memory, I/O and context switches of the target's process tree."""

    name = "host"
    tables = ("host", "threads", "system")

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, adaptive: bool = False,
                 load: IdleCpu | None = None) -> None:
        super().__init__(interval_s)
        self._load = (load or IdleCpu()) if adaptive else None
        self._saturated = False
        self._t0 = time.monotonic()
        self._intervals: list[dict[str, Any]] = []  # interval changes, for run.json
        self._changes = 0
        self._tree: ProcessTree | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._last_cpu: dict[int, tuple[float, float]] = {}  # pid -> (cpu seconds, wall time)
        self._last_thread: dict[tuple[int, int], tuple[float, float]] = {}
        self._last_sys: Any = None
        self._seen: set[int] = set()

    def open(self, run_dir: str, root_pid: int) -> None:
        if not psutil.pid_exists(root_pid):
            raise Unavailable(f"process {root_pid} not found")
        self._tree = ProcessTree(root_pid)
        self._t0 = time.monotonic()
        if self._load is not None:
            cores = self._load.cores
            plan = (f"{max(self.interval_s, SATURATED_INTERVAL_S):g} s while no core is idle"
                    if cores <= SMALL_HOST_CORES else f"kept (more than {SMALL_HOST_CORES} cores)")
            self._intervals.append({"at_s": 0.0, "interval_s": self.interval_s, "why": f"start: {cores} cores; {plan}"})

    def extra_status(self) -> dict[str, Any]:
        st: dict[str, Any] = {"processes_seen": len(self._seen)} if self._tree is not None else {}
        if self._load is not None:
            st["adaptive"] = True
            st["intervals"] = list(self._intervals)
            if self._changes >= MAX_INTERVAL_CHANGES:
                st["interval_changes"] = self._changes
        return st

    # -- sampling --------------------------------------------------------------

    def tick(self) -> None:
        """Take one sample of the system and every process in the tree."""
        assert self._tree is not None
        ts = time.time_ns()
        self._sample_system(ts)
        pids = self._tree.scan()
        for pid in list(self._procs.keys() - pids):
            self._forget(pid)
        for pid in pids:
            self._sample_process(pid, ts)
        self._adapt()

    def _adapt(self) -> None:
        """Stretch the interval while a small host is saturated, restore it once a core is free."""
        spare = self._load.spare_cores() if self._load is not None else None
        if spare is None or self._load is None:
            return
        now_saturated = saturated(self._load.cores, spare, self._saturated)
        if now_saturated == self._saturated:
            return
        self._saturated = now_saturated
        interval = max(self.interval_s, SATURATED_INTERVAL_S) if now_saturated else self.interval_s
        self.set_interval(interval)
        self._changes += 1
        if len(self._intervals) < MAX_INTERVAL_CHANGES:
            why = (f"{spare:.2f} of {self._load.cores} cores idle: psutil's CPU would come out of the target"
                   if now_saturated else f"{spare:.2f} of {self._load.cores} cores idle again")
            self._intervals.append({"at_s": round(time.monotonic() - self._t0, 1), "interval_s": interval,
                                    "spare_cores": round(spare, 2), "why": why})

    def _sample_system(self, ts: int) -> None:
        cur = psutil.cpu_times()
        if self._load is not None:
            self._load.add(time.monotonic(), idle_seconds(cur), sum(cur))
        prev, self._last_sys = self._last_sys, cur
        total = sum(cur) - sum(prev) if prev is not None else 0.0
        if total <= 0:  # first tick, or too soon for the kernel's 10 ms counters: no interval yet
            return
        idle = cur.idle - prev.idle
        iowait = getattr(cur, "iowait", 0.0) - getattr(prev, "iowait", 0.0)
        mem = psutil.virtual_memory()
        self.write("system", {
            "ts_ns": ts,
            "cpu_pct": round(max(0.0, 100.0 * (total - idle - iowait) / total), 2),
            "iowait_pct": round(100.0 * iowait / total, 2),
            # total - available: memory that cannot be reclaimed without swapping
            "mem_used_bytes": mem.total - mem.available,
            "mem_total_bytes": mem.total,
        })

    def _forget(self, pid: int) -> None:
        self._procs.pop(pid, None)
        self._last_cpu.pop(pid, None)
        for key in [k for k in self._last_thread if k[0] == pid]:
            del self._last_thread[key]

    def _sample_process(self, pid: int, ts: int) -> None:
        p = self._procs.get(pid)
        try:
            if p is None:
                p = self._procs[pid] = psutil.Process(pid)
                self._seen.add(pid)
            with p.oneshot():
                # an exited process not yet reaped: its memory and counters read as zeros
                if p.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    raise psutil.NoSuchProcess(pid)
                row = self._process_row(p, pid, ts)
                if row["rss_bytes"] == 0:  # exiting: its memory is released before it turns zombie
                    raise psutil.NoSuchProcess(pid)
                threads = _get(p.threads)
        except psutil.NoSuchProcess:  # gone (or a zombie) between the scan and now
            self._forget(pid)
            return
        self.write("host", row)
        for t in threads or ():
            key = (pid, t.id)
            cpu = (t.user_time, t.system_time)
            # unchanged threads add no information to cumulative columns: skip them,
            # which keeps the table small when a process has hundreds of idle threads
            if self._last_thread.get(key) != cpu:
                self._last_thread[key] = cpu
                self.write("threads", {"ts_ns": ts, "pid": pid, "tid": t.id,
                                                "user_s": t.user_time, "system_s": t.system_time,
                                                "run_delay_s": _run_delay_s(pid, t.id)})

    def _process_row(self, p: psutil.Process, pid: int, ts: int) -> dict[str, Any]:
        now = time.time()
        times = p.cpu_times()  # raises NoSuchProcess for a vanished process
        cpu = times.user + times.system
        prev = self._last_cpu.get(pid)
        if prev is None:  # first sight: average since the process started
            created = _get(p.create_time)
            prev = (0.0, created) if created is not None else None
        cpu_pct = None
        if prev is not None and now - prev[1] > 1e-3:
            cpu_pct = round(100.0 * (cpu - prev[0]) / (now - prev[1]), 2)
        self._last_cpu[pid] = (cpu, now)
        io = _get(p.io_counters)
        ctx = _get(p.num_ctx_switches)
        mem = _get(p.memory_info)
        return {
            "ts_ns": ts, "pid": pid, "ppid": _get(p.ppid), "name": _get(p.name),
            "cpu_pct": cpu_pct,
            "rss_bytes": mem.rss if mem else None,
            "read_bytes": getattr(io, "read_bytes", None),
            "write_bytes": getattr(io, "write_bytes", None),
            # read/write_chars count every read()/write(), pipes and sockets included
            "read_chars": getattr(io, "read_chars", None),
            "write_chars": getattr(io, "write_chars", None),
            "ctx_vol": ctx.voluntary if ctx else None,
            "ctx_invol": ctx.involuntary if ctx else None,
            "num_threads": _get(p.num_threads),
            "iowait_s": getattr(times, "iowait", None),
        }
