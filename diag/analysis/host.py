"""Host metrics: process-tree CPU against the cores, memory, disk and I/O wait (psutil, py-spy)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.columns import as_bool, complete
from diag.analysis.context import Context, mean_or_none, num, ratio
from diag.analysis.shares import thread_run_delay
from diag.analysis.stacks import io_frames

METRICS = [
    Metric("steady.process_cpu_cores", "cores", "CPU used by the whole process tree (1 = one core busy)."),
    Metric("steady.cpu_cores", "cores", "Logical cores of the host."),
    Metric("steady.process_cpu_share", "ratio", "Process-tree CPU / logical cores."),
    Metric("steady.worker_cpu_cores", "cores", "CPU used by processes other than the stepping one (workers, children)."),
    Metric("steady.worker_cpu_demand", "cores", "Cores the other processes of the tree wanted: their CPU plus their threads' waits for a core (schedstat run delay)."),
    Metric("steady.system_cpu_share", "ratio", "Whole-machine CPU busy share."),
    Metric("steady.other_cpu_cores", "cores", "CPU used by processes outside the profiled tree: whole-machine CPU minus the tree's."),
    Metric("steady.rss_max_bytes", "bytes", "Peak resident memory of the process tree."),
    Metric("steady.disk_read_bps", "bytes/s", "Storage reads of the process tree (psutil read_bytes)."),
    Metric("steady.read_chars_bps", "bytes/s", "All reads of the process tree, pipes and sockets included (psutil read_chars)."),
    Metric("steady.iowait_share", "ratio", "Block-I/O wait of the process tree per second (psutil iowait; may exceed 1 with several processes)."),
    Metric("steady.system_iowait_share", "ratio", "Whole-machine I/O wait share."),
    Metric("steady.helper_threads_busy", "cores", "Python threads of the stepping process other than the stepping thread, running (stack samples; OpenMP threads have no Python stack, so their spinning is not counted)."),
    Metric("steady.worker_blocked_share", "ratio", "Share of other processes' running stack time off CPU and not queued for a core: stack samples vs psutil CPU and run delay."),
    Metric("steady.worker_io_share", "ratio", "Share of other processes' stack samples waiting in file or socket reads (input workers)."),
]


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if ctx.seconds <= 0:
        return out
    cores = (ctx.run.manifest.get("host") or {}).get("cores_logical")
    out["steady.cpu_cores"] = float(cores) if cores else None
    host = ctx.window("host")
    if not host.empty:
        per_pid = host.groupby("pid")["cpu_pct"].apply(lambda s: mean_or_none(num(s)) or 0.0)
        total = float(per_pid.sum()) / 100
        out["steady.process_cpu_cores"] = total
        out["steady.process_cpu_share"] = ratio(total, out["steady.cpu_cores"])
        main_pid = ctx.main[0] if ctx.main else None
        out["steady.worker_cpu_cores"] = float(per_pid[per_pid.index != main_pid].sum()) / 100
        # a worker queued for a core wants one: on a busy host its CPU alone understates its work
        queued = sum(_queued_s(ctx, int(p)) for p in per_pid.index if p != main_pid) / ctx.seconds
        out["steady.worker_cpu_demand"] = out["steady.worker_cpu_cores"] + queued
        rss = host.groupby("ts_ns")["rss_bytes"].sum()
        out["steady.rss_max_bytes"] = float(rss.max()) if len(rss) else None
        out["steady.disk_read_bps"] = _rate(ctx, "read_bytes")
        out["steady.read_chars_bps"] = _rate(ctx, "read_chars")
        out["steady.iowait_share"] = _rate(ctx, "iowait_s")
    system = ctx.window("system")
    if not system.empty:
        c = mean_or_none(num(system["cpu_pct"]))
        w = mean_or_none(num(system["iowait_pct"]))
        out["steady.system_cpu_share"] = c / 100 if c is not None else None
        out["steady.system_iowait_share"] = w / 100 if w is not None else None
        tree = out.get("steady.process_cpu_cores")
        if c is not None and tree is not None and cores:
            # the host sampler follows only the target's tree: the rest of the machine's CPU is others'
            out["steady.other_cpu_cores"] = max(0.0, c / 100 * float(cores) - tree)
    _stacks(ctx, out)
    return out


def _rate(ctx: Context, col: str) -> float | None:
    """Per-second increase of a cumulative per-process counter over the window, summed over processes."""
    host = complete(ctx.run, "host")
    total, seen = 0.0, False
    for _, g in host.groupby("pid"):
        ts = g["ts_ns"].to_numpy(dtype=np.int64)
        v = num(g[col])
        ok = ~np.isnan(v)
        ts, v = ts[ok], v[ok]
        if len(ts) < 2:
            continue
        a, b = max(ctx.t0, ts[0]), min(ctx.t1, ts[-1])
        if b <= a:
            continue
        va, vb = intervals.value_at(ts, v, a), intervals.value_at(ts, v, b)
        if va is None or vb is None:
            continue
        seen = True
        total += max(0.0, vb - va) / ((b - a) / 1e9)
    return total if seen else None


def _stacks(ctx: Context, out: dict[str, float | None]) -> None:
    """Other threads and processes: are the input workers reading, and are helper threads busy?"""
    st = ctx.window("stacks", by_end=True)
    if st.empty or ctx.main is None:
        return
    pid, tid = ctx.main[0], ctx.stack_tid
    st = st[["ts_ns", "dur_ns", "pid", "tid", "stack", "idle"]]
    ts = st["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + np.nan_to_num(num(st["dur_ns"]), nan=0.0).astype(np.int64)
    dur = (np.minimum(end, ctx.t1) - np.maximum(ts, ctx.t0)).clip(0) / 1e9
    io = io_frames(st["stack"]).to_numpy()
    idle = as_bool(st["idle"])
    same_pid = st["pid"].to_numpy() == pid
    helpers = same_pid & (st["tid"].to_numpy() != tid)
    if helpers.any() and tid is not None:
        out["steady.helper_threads_busy"] = float(dur[helpers & ~idle & ~io].sum()) / ctx.seconds
    others = ~same_pid
    # only threads that do something count: a parked helper thread says nothing about input
    sel = others & (~idle | io)
    tot = float(dur[sel].sum())
    if tot > 0:
        out["steady.worker_io_share"] = float(dur[sel & io].sum()) / tot
    _workers_blocked(ctx, st["pid"].to_numpy(), dur, others & ~idle & ~io, out)


def _workers_blocked(ctx: Context, pids: np.ndarray, dur: np.ndarray, running: np.ndarray,
                     out: dict[str, float | None]) -> None:
    """Share of the workers' "running" stack time they were off CPU: blocked in a C call (a builtin read)."""
    host = ctx.window("host")
    if host.empty or not running.any():
        return
    cpu_s = host.groupby("pid")["cpu_pct"].apply(lambda c: (mean_or_none(num(c)) or 0.0) / 100 * ctx.seconds)
    stack_s = pd.Series(dur[running]).groupby(pids[running]).sum()
    known = stack_s[stack_s.index.isin(cpu_s.index)]
    if known.sum() <= 0:
        return
    # a worker queued for a core (another process holds it) is not blocked either
    queued = pd.Series({p: _queued_s(ctx, int(p)) for p in known.index})
    blocked = (known - cpu_s.reindex(known.index).fillna(0.0) - queued).clip(lower=0.0)
    out["steady.worker_blocked_share"] = float(blocked.sum() / known.sum())


def _queued_s(ctx: Context, pid: int) -> float:
    """Seconds the threads of one process waited for a core over the window (schedstat; 0 unknown)."""
    th = complete(ctx.run, "threads")
    if th.empty or "run_delay_s" not in th.columns:
        return 0.0
    tids = th.loc[th["pid"] == pid, "tid"].unique()
    return sum((thread_run_delay(ctx, pid, int(t)) or 0.0) for t in tids) * ctx.seconds
