"""Where the stepping thread's steady-state time goes: model, copies, syncs, GC, outside work."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.columns import as_bool, complete, weights
from diag.analysis.context import Context, num, ratio
from diag.analysis.links import pcie_bps
from diag.analysis.stacks import io_frames, model_frames, worker_wait_frames

# A copy's wall time can include waiting for queued GPU work (a blocking copy
# waits for the stream). No real host<->device link moves less than this, so
# time beyond bytes / this rate is counted as waiting, not copying.
SLOWEST_LINK_BPS = 3e9
PINNED_EFFICIENCY = 0.8  # what pinned copies reach of the link's rate, typically
_W = ["weight"]  # every interval table carries it (docs/run-format.md; 1 when rows are kept in full)

METRICS = [
    Metric("steady.inside_model_share", "ratio", "Share of steady time the stepping thread spends inside model calls; its shares leave out time queued for a core."),
    Metric("steady.outside_model_share", "ratio", "Share of steady time the stepping thread spends outside model calls."),
    Metric("steady.step_thread_cpu", "ratio", "CPU time of the stepping thread per second of steady time (1 = one core)."),
    Metric("steady.outside_busy_share", "ratio", "Share of steady time the stepping thread runs on CPU outside the model (not copying or syncing)."),
    Metric("steady.outside_wait_share", "ratio", "Share of steady time the stepping thread waits outside the model (blocked, not copying or syncing)."),
    Metric("steady.step_thread_runq_share", "ratio", "Share of steady time the stepping thread was runnable but waiting for a CPU core (schedstat run delay)."),
    Metric("steady.io_wait_share", "ratio", "Share of steady time the stepping thread waits off-CPU in file or socket reads outside the model (stack samples; inside requests if any)."),
    Metric("steady.known_wait_share", "ratio", "Share of steady time the stepping thread waits outside the model on a queue, lock or select (another thread or process, or the next request)."),
    Metric("steady.blocked_outside_share", "ratio", "Share of steady time the stepping thread is off CPU outside the model in a call diag cannot name (a builtin file read, a C-level socket, sleep): thread CPU vs stack samples."),
    Metric("steady.copy_share", "ratio", "Share of steady time the stepping thread spends in host<->device copies (wait for queued GPU work excluded)."),
    Metric("steady.copy_pageable_fraction", "ratio", "Fraction of copy time that moved pageable (not pinned) host memory."),
    Metric("steady.copy_bytes_per_step", "bytes", "Bytes copied between host and device per step."),
    Metric("steady.copy_bps", "bytes/s", "Host<->device copy throughput over the steady state."),
    Metric("run.pcie_bw", "bytes/s", "The GPU's PCIe link rate per direction (its generation and width from NVML), where known."),
    Metric("steady.pinned_copy_speedup", "factor",
           "How much faster the pageable copies would run pinned: 80% of the PCIe link rate over the rate they reached (at least 1)."),
    Metric("steady.sync_share", "ratio", "Share of steady time the stepping thread is blocked in synchronizing calls."),
    Metric("steady.syncs_per_step", "count", "Synchronizing calls per step, inside or between steps."),
    Metric("steady.syncs_in_step_per_step", "count", "Synchronizing calls made inside the model call, per step."),
    Metric("steady.gc_share", "ratio", "Share of steady time the stepping process is paused in garbage collection."),
    Metric("steady.gc_pause_max_ms", "ms", "Longest garbage-collection pause in the steady state."),
    Metric("steady.gc_tail_overlap", "ratio", "Fraction of the slowest 1% of steps that overlap a GC pause."),
]


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    T = ctx.seconds
    if ctx.main is None or T <= 0:
        return out
    pid, tid = ctx.main
    t0, t1 = ctx.t0, ctx.t1
    mine = ctx.thread_rows(ctx.window("steps", by_end=True), pid, tid, ["ts_ns", "dur_ns"] + _W)
    s_ts = mine["ts_ns"].to_numpy(dtype=np.int64)
    s_end = s_ts + mine["dur_ns"].to_numpy(dtype=np.int64)
    # one thread's outermost calls never overlap: the share is a (weighted) sum
    clipped = (np.minimum(s_end, t1) - np.maximum(s_ts, t0)).clip(0)
    inside = min(1.0, float((clipped * weights(mine)).sum()) / 1e9 / T)
    out["steady.inside_model_share"] = inside
    out["steady.outside_model_share"] = max(0.0, 1.0 - inside)
    mine_steady = ctx.steps(main_only=True, cols=["ts_ns", "dur_ns", "syncs", "in_window"] + _W)
    n_steps = max(1.0, float(weights(mine_steady).sum()))

    # copies: wall time capped at what the slowest link would need for the bytes
    copies = ctx.thread_rows(ctx.window("copies", by_end=True), pid, tid,
                             ["ts_ns", "dur_ns", "bytes", "pinned", "in_step"] + _W)
    copy_out_ns = 0.0
    if not copies.empty:
        cw = weights(copies)
        dur = np.nan_to_num(num(copies["dur_ns"]), nan=0.0) * cw
        nbytes = np.nan_to_num(num(copies["bytes"]), nan=0.0) * cw
        cost = np.minimum(dur, nbytes / SLOWEST_LINK_BPS * 1e9)
        pageable = ~as_bool(copies["pinned"])
        total = float(cost.sum())
        out["steady.copy_share"] = total / 1e9 / T
        out["steady.copy_pageable_fraction"] = ratio(float(cost[pageable].sum()), total)
        out["steady.copy_bytes_per_step"] = float(nbytes.sum()) / n_steps
        out["steady.copy_bps"] = float(nbytes.sum()) / T
        link = pcie_bps(ctx.run.manifest)
        if link is not None:
            out["run.pcie_bw"] = link
            page_s = float(dur[pageable].sum()) / 1e9
            if page_s > 0:
                out["steady.pinned_copy_speedup"] = max(1.0, PINNED_EFFICIENCY * link * page_s
                                                        / float(nbytes[pageable].sum() or 1.0))
        outside = ~as_bool(copies["in_step"])
        # the thread is held for the copy's whole wall time (transfer or waiting for the GPU)
        copy_out_ns = float(dur[outside].sum())
    elif ctx.device == "cuda" and ctx.hooks_ok:  # hooks watched and saw no copy
        out["steady.copy_share"] = 0.0
        out["steady.copy_bytes_per_step"] = 0.0

    syncs = ctx.thread_rows(ctx.window("syncs", by_end=True), pid, tid, ["ts_ns", "dur_ns", "in_step"] + _W)
    in_step_syncs = float((np.clip(np.nan_to_num(num(mine_steady["syncs"]), nan=0.0), 0, None)
                           * weights(mine_steady)).sum()) if not mine_steady.empty else 0.0  # -1: unknown
    sync_out_ns = 0.0
    if not syncs.empty:
        sw = weights(syncs)
        sdur = np.nan_to_num(num(syncs["dur_ns"]), nan=0.0) * sw
        out["steady.sync_share"] = float(sdur.sum()) / 1e9 / T
        outside = ~as_bool(syncs["in_step"])
        sync_out_ns = float(sdur[outside].sum())
        n_out = float(sw[outside].sum())
    else:
        out["steady.sync_share"] = 0.0 if ctx.device == "cuda" and ctx.hooks_ok else None
        n_out = 0
    if (ctx.device == "cuda" and ctx.hooks_ok) or in_step_syncs or n_out:
        out["steady.syncs_per_step"] = (in_step_syncs + n_out) / n_steps
        out["steady.syncs_in_step_per_step"] = in_step_syncs / n_steps

    outside_share = max(0.0, 1.0 - inside)
    waits = (copy_out_ns + sync_out_ns) / 1e9 / T
    cpu = thread_cpu(ctx, pid, tid)
    out["steady.step_thread_cpu"] = cpu
    runq = thread_run_delay(ctx, pid, tid)
    out["steady.step_thread_runq_share"] = runq
    rq = min(runq or 0.0, 0.95)
    st = _stack_shares(ctx, pid, tid, s_ts, s_end, copies, syncs, max(0.0, outside_share - waits))
    busy = st["active"] if st else None
    if cpu is not None:
        # CPU time the model, copies and syncs cannot account for was spent outside: a floor.
        # And no more than the thread's CPU time can have been busy: a non-idle stack sample
        # may be blocked in a C call (a builtin read, sleep, the GIL). Time queued for a core
        # comes back below, where the wait exceeds what schedstat says was blocked.
        floor = max(0.0, cpu - inside - waits)
        busy = floor if busy is None else min(max(busy, floor), cpu)
    if busy is not None:
        busy = min(busy, max(0.0, outside_share - waits))
        wait = max(0.0, outside_share - waits - busy)
        if cpu is not None:
            # schedstat says how long the thread was blocked (neither running nor queued for a
            # core): a wait beyond that is time it wanted a core (a runnable thread's stack
            # sample can look idle), so it counts as busy
            blocked = max(0.0, 1.0 - cpu - rq)
            if wait > blocked:
                busy, wait = busy + wait - blocked, blocked
        # Waiting for a core (another process holds it) is neither the model's work nor the
        # program's: take it out of the time it inflated (inside the model and busy outside, in
        # proportion: a thread queues for a core only when it wants to run) and judge every share
        # over the time the thread was running or blocked (docs/rules.md, "A busy host").
        want = inside + busy
        q = min(rq, want)
        q_in, q_out = (q * inside / want, q * busy / want) if q > 0 else (0.0, 0.0)
        keep = 1.0 - (q_in + q_out)
        inside_eff = max(0.0, inside - q_in) / keep
        out["steady.inside_model_share"] = inside_eff
        out["steady.outside_model_share"] = max(0.0, 1.0 - inside_eff)
        out["steady.outside_busy_share"] = max(0.0, busy - q_out) / keep
        out["steady.outside_wait_share"] = wait / keep
        if st is not None:
            # a read frame counts as waiting only while the thread was off the CPU: a decoder
            # reading from an in-memory file object (Pillow, gzip) runs
            io, io_all = st["io"], st["io_all"]
            if cpu is not None:
                off = max(0.0, 1.0 - cpu - rq)
                io = min(io, max(st["io_idle"], off))
                io_all = min(io_all, max(st["io_all_idle"], off))
            else:
                io, io_all = st["io_idle"], st["io_all_idle"]
            out["steady.io_wait_share"] = io / keep
            out["steady.known_wait_share"] = st["known"] / keep
            if cpu is not None and not st["requests"]:
                # off CPU outside the model, not in a known wait or a recognised read:
                # blocked in a C call (a builtin file read, a C-level socket, sleep)
                out["steady.blocked_outside_share"] = max(0.0, wait - io_all - st["known"]) / keep

    _gc(ctx, pid, mine_steady, out)
    return out


def thread_cpu(ctx: Context, pid: int, tid: int) -> float | None:
    """CPU seconds per second of one thread over the window (threads table, cumulative)."""
    return _thread_rate(ctx, pid, tid, ("user_s", "system_s"))


def thread_run_delay(ctx: Context, pid: int, tid: int) -> float | None:
    """Seconds per second one thread was runnable but waiting for a core (schedstat)."""
    return _thread_rate(ctx, pid, tid, ("run_delay_s",))


def _thread_rate(ctx: Context, pid: int, tid: int, cols: tuple[str, ...]) -> float | None:
    th = complete(ctx.run, "threads")
    if th.empty or any(c not in th.columns for c in cols):
        return None
    th = th[(th["pid"] == pid) & (th["tid"] == tid)]
    if th.empty:
        return None
    values = [num(th[c]) for c in cols]
    if all(np.isnan(v).all() for v in values):
        return None
    ts = th["ts_ns"].to_numpy(dtype=np.int64)
    cum = sum(np.nan_to_num(v, nan=0.0) for v in values)
    # rows are written only when the value changes: the value holds until the next row
    a = intervals.value_at(ts, cum, ctx.t0)
    b = intervals.value_at(ts, cum, ctx.t1)
    if a is None or b is None:
        return None
    if ts[0] > ctx.t0:  # first seen inside the window: measure from there
        span = (ctx.t1 - ts[0]) / 1e9
    else:
        span = ctx.seconds
    return ratio(max(0.0, b - a), span)


def _stack_shares(ctx: Context, pid: int, tid: int, s_ts: np.ndarray, s_end: np.ndarray,
                  copies: pd.DataFrame, syncs: pd.DataFrame, measured: float) -> dict[str, float] | None:
    """The stepping thread's stack samples outside the model (and outside copies and syncs), as shares
    of the steady state that together make up `measured` (that time, as the hooks measured it).

    A sample's duration is coarse (py-spy merges a run of one stack into one sample, runs at
    10-20 Hz on a small host, restarts when its rate changes): a sample that caught a short step
    stretches over the sleep after it. So the samples say how the time outside the model splits,
    the hooks how much of it there was.

    active: running Python (not a known wait, not a read); io: in a file or
    socket read (inside request ranges when the run has requests: between
    requests a server waits for load, not input); known: in a known wait
    (queue, lock, select on a pipe: waiting for another thread or process).
    """
    stack_tid = ctx.stack_tid
    if stack_tid is None:
        return None
    st = ctx.thread_rows(ctx.window("stacks", by_end=True), pid, stack_tid, ["ts_ns", "dur_ns", "idle", "stack"])
    if st.empty:
        return None
    ts = st["ts_ns"].to_numpy(dtype=np.int64)
    end = ts + np.nan_to_num(num(st["dur_ns"]), nan=0.0).astype(np.int64)
    dur = (np.minimum(end, ctx.t1) - np.maximum(ts, ctx.t0)).clip(0) / 1e9 / ctx.seconds
    idle = as_bool(st["idle"])
    io = io_frames(st["stack"]).to_numpy()
    # a thread in a wait for its own workers waits, whatever the sampler's idle flag says: woken by
    # a worker's batch, it sits runnable (queued for a core) in the same frame
    worker_wait = worker_wait_frames(st["stack"]).to_numpy()
    mid = ts + (end - ts) // 2  # a sample interval belongs where its middle lies
    # inside the union of copies and syncs = inside either: each table is sorted, their concatenation not
    outside = ~intervals.inside(mid, s_ts, s_end)
    for waits in (copies, syncs):
        w_ts = waits["ts_ns"].to_numpy(dtype=np.int64)
        outside &= ~intervals.inside(mid, w_ts, w_ts + waits["dur_ns"].to_numpy(dtype=np.int64))
    outside &= ~model_frames(st["stack"]).to_numpy()  # a step whose row was sampled away
    req = ctx.requests()
    in_req = np.ones(len(ts), dtype=bool)
    if not req.empty:
        r_ts = req["ts_ns"].to_numpy(dtype=np.int64)
        in_req = intervals.inside(mid, r_ts, r_ts + req["dur_ns"].to_numpy(dtype=np.int64))
    sampled = float(dur[outside].sum())
    if sampled > 0:
        dur = dur * (measured / sampled)
    return {
        "active": float(dur[outside & ~idle & ~io & ~worker_wait].sum()),
        "io": float(dur[outside & io & in_req].sum()),
        "io_all": float(dur[outside & io].sum()),
        # the same, only where the sampler saw the thread off the CPU
        "io_idle": float(dur[outside & io & idle & in_req].sum()),
        "io_all_idle": float(dur[outside & io & idle].sum()),
        "known": float(dur[outside & (idle | worker_wait) & ~io].sum()),
        "requests": not req.empty,
    }


def _gc(ctx: Context, pid: int, steps: pd.DataFrame, out: dict[str, float | None]) -> None:
    ev = ctx.window("events", by_end=True)
    gc = ev[(ev["kind"] == "gc").to_numpy() & ctx.thread_mask(ev, pid)] if not ev.empty else ev
    if not ctx.hooks_ok and gc.empty:
        return
    if gc.empty:
        out["steady.gc_share"] = 0.0
        out["steady.gc_tail_overlap"] = 0.0
        return
    g_ts = gc["ts_ns"].to_numpy(dtype=np.int64)
    g_end = g_ts + np.nan_to_num(num(gc["dur_ns"]), nan=0.0).astype(np.int64)
    gw = weights(gc)
    clipped = (np.minimum(g_end, ctx.t1) - np.maximum(g_ts, ctx.t0)).clip(0)
    out["steady.gc_share"] = min(1.0, float((clipped * gw).sum()) / 1e9 / ctx.seconds)
    out["steady.gc_pause_max_ms"] = float((g_end - g_ts).max()) / 1e6
    steps = steps[~as_bool(steps["in_window"])] if not steps.empty else steps
    if len(steps) >= 20:
        dur = steps["dur_ns"].to_numpy(dtype=np.int64)
        cut = np.percentile(dur, 99)
        slow = steps[dur > cut]  # strictly slower: ties at the bulk's latency are not the tail
        hit = intervals.overlaps(slow["ts_ns"].to_numpy(dtype=np.int64),
                                 (slow["ts_ns"] + slow["dur_ns"]).to_numpy(dtype=np.int64), g_ts, g_end)
        # with 1 in k pauses kept, about k times more slow steps met one
        out["steady.gc_tail_overlap"] = min(1.0, float(hit.mean()) * float(gw.mean())) if len(hit) else 0.0

