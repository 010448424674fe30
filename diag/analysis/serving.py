"""Serving metrics: requests found in servers, their measured parts and stages, the event loop, the
model threads, worker processes, and generate() calls.

A found request (hooks/asgi.py, wsgi.py) carries its pre-handler wait
(`wait_ns`: arrival to handler start) and handler time; its model part is
the step that served it (latency.queue_wait_ns). The loop lag probe and the
loop thread's CPU say how long the event loop was held, and whether it was held
working (Python on the loop) or blocked off CPU (a blocking call in `async
def`). Names (hot frames, the biggest stage) are `names()`: rule titles may
use them like metrics.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from diag.analysis import intervals, stacks, threads
from diag.analysis.catalog import Metric
from diag.analysis.columns import weighted_percentile, weights
from diag.analysis.context import Context, num

MB = 1 << 20
# An idle loop's probe still reports ~1 ms (the selector's millisecond timeout), and a loop thread
# waiting a few ms for a core on a busy host is not held by the program: a tick later than this is.
IDLE_LAG_NS = 5_000_000

METRICS = [
    Metric("steady.serving", "flag", "1 when the program serves requests: a server process (uvicorn, gunicorn) or requests found by the ASGI/WSGI/generate hooks."),
    Metric("steady.requests_found", "count", "Requests found with no code change (ASGI, WSGI, generate) in the steady state."),
    Metric("steady.pre_handler_wait_p50_ms", "ms", "Median time a found request waited between its arrival and its handler's start (a busy event loop, no free worker thread)."),
    Metric("steady.pre_handler_wait_p99_ms", "ms", "99th percentile of the wait before the handler runs."),
    Metric("steady.pre_handler_wait_share", "ratio", "Share of found requests' latency spent before the handler ran, the wait in the kernel's backlog included (steady.backlog_wait_ms)."),
    Metric("steady.pre_handler_wait_mean_ms", "ms", "Mean time a found request waited before its handler ran: the measured wait plus the wait in the kernel's backlog."),
    Metric("steady.backlog_mean", "count", "Requests waiting in the kernel for the server, on average: connections in its listening sockets' accept queues plus accepted connections with bytes it has not read (sockets table)."),
    Metric("steady.backlog_max", "count", "Most requests seen waiting in the kernel for the server at once."),
    Metric("steady.backlog_wait_ms", "ms", "Mean time a request waited in the kernel before the server took it, by Little's law: steady.backlog_mean over the requests served per second."),
    Metric("steady.handler_blocked_share", "ratio", "Share of WSGI handler time their thread was off CPU (CPU counters), outside the model and not waiting on its own threads or queues: blocked in a call (a sync client, a sleep)."),
    Metric("steady.handler_p50_ms", "ms", "Median handler time of found requests (the app call, start to return)."),
    Metric("steady.handler_p99_ms", "ms", "99th percentile handler time of found requests."),
    Metric("steady.part_backlog_share", "ratio", "Share of request time waiting in the kernel's backlog before the server took the request (Little's law)."),
    Metric("steady.part_pre_handler_share", "ratio", "Share of request time before the handler ran (measured part)."),
    Metric("steady.part_to_model_share", "ratio", "Share of request time from the handler's start to the start of the step that served it (pre-processing, queue to the model)."),
    Metric("steady.part_model_share", "ratio", "Share of request time in the step that served it."),
    Metric("steady.part_post_share", "ratio", "Share of request time after the serving step (or after the handler, where no step served it)."),
    Metric("steady.top_stage_share", "ratio", "Share of request time in the biggest diag.stage()/NVTX stage (name: steady.top_stage)."),
    Metric("steady.loop_lag_p50_ms", "ms", "Event-loop lag, median of the probe's ticks (the busiest loop)."),
    Metric("steady.loop_lag_p99_ms", "ms", "Event-loop lag, 99th percentile (the busiest loop)."),
    Metric("steady.loop_lag_max_ms", "ms", "Longest event-loop lag seen (the busiest loop)."),
    Metric("steady.loop_blocked_share", "ratio", "Share of the steady state the busiest event loop was held: share of the probe's ticks that ran over 5 ms late."),
    Metric("steady.loop_thread_cpu", "cores", "CPU used by that event-loop thread (1 = one core)."),
    Metric("steady.loop_thread_demand", "cores", "CPU that event-loop thread used plus the time it waited for a core (runnable): the work it had, whatever the host's other load."),
    Metric("steady.loop_held_share", "ratio", "Share of the steady state the busiest event loop was held: its late ticks or its thread's work (CPU and waits for a core), the larger (the probe misses short holds)."),
    Metric("steady.loop_blocked_offcpu_share", "ratio", "Share of the steady state the event loop was held while its thread was off CPU: blocked in a call (sleep, a sync client, a read) inside async code."),
    Metric("steady.executor_cpu", "cores", "CPU used by executor threads (asyncio.to_thread, ThreadPoolExecutor) of the serving processes."),
    Metric("steady.model_busy_share", "ratio", "Share of the steady state some model call (step) was running in the serving processes."),
    Metric("steady.model_on_executor", "flag", "1 when the model runs on an executor or batcher thread, not the event-loop or request thread."),
    Metric("steady.batcher_seen", "flag", "1 when requests are batched: steps with batch > 1 were seen, or the model runs on an executor thread."),
    Metric("steady.server_workers", "count", "Server worker processes that served requests."),
    Metric("steady.worker_request_imbalance", "factor", "Requests of the busiest worker over the mean per worker (1 = even; the number of workers = all on one)."),
    Metric("steady.request_read_bytes", "bytes", "Storage reads (psutil read_bytes) of the serving processes per request."),
    Metric("steady.serving_disk_read_bps", "bytes/s", "Storage reads of the serving processes per second."),
    Metric("steady.generate_calls", "count", "Hugging Face generate() calls in the steady state."),
    Metric("steady.ttft_p50_ms", "ms", "generate(): time to first token, median."),
    Metric("steady.ttft_p99_ms", "ms", "generate(): time to first token, 99th percentile."),
    Metric("steady.tpot_p50_ms", "ms", "generate(): time per output token after the first, median."),
    Metric("steady.gen_tokens_per_s", "per_s", "generate(): new tokens (all sequences) per second of steady state."),
    Metric("steady.prefill_share", "ratio", "generate(): share of call time in the prefill (first forward)."),
    Metric("steady.decode_share", "ratio", "generate(): share of call time after the first token (decode)."),
]

# Names rule templates may use beside metrics (strings, never None).
NAMES = {
    "steady.loop_hot_frame": "the event-loop thread's hottest frame of the program's own code",
    "steady.request_hot_frame": "the request threads' (or event-loop thread's) hottest own frame",
    "steady.model_thread_role": "what runs the model: the event-loop thread, an executor thread...",
    "steady.top_stage": "the biggest diag.stage()/NVTX stage inside requests",
}
UNNAMED = "a frame diag did not sample"


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if ctx.seconds <= 0:
        return out
    server_pids = _server_pids(ctx)
    req = ctx.requests()
    found = req[req["source"].isin(["asgi", "wsgi", "generate"]).to_numpy()] if not req.empty else req
    out["steady.serving"] = 1.0 if (server_pids or not found.empty) else 0.0
    if not out["steady.serving"]:
        _generate(ctx, out)
        return out
    out["steady.requests_found"] = float(weights(found).sum()) if not found.empty else 0.0
    _backlog(ctx, out)
    _parts(ctx, found, out)
    _handler_blocked(ctx, found, out)
    _stages(ctx, req, out)
    _loop(ctx, out)
    _model(ctx, server_pids, out)
    _workers(ctx, found, out)
    _reads(ctx, req, server_pids, out)
    _generate(ctx, out)
    return out


def _server_pids(ctx: Context) -> set[int]:
    ev = ctx.run.table("events")
    if ev.empty:
        return set()
    return {p for p in ids(ev.loc[ev["kind"] == "server", "pid"]) if p >= 0}


def ids(s: pd.Series) -> list[int]:
    """A pid or tid column as ints (a null id becomes -1: no process or thread has it)."""
    return pd.to_numeric(s, errors="coerce").fillna(-1).astype(np.int64).tolist()


def server_roles(run_events: pd.DataFrame) -> dict[int, dict]:
    """pid -> the `server` event's detail (role, worker_index, ...)."""
    out: dict[int, dict] = {}
    if run_events.empty:
        return out
    ev = run_events[run_events["kind"] == "server"]
    for pid, name, detail in zip(ev["pid"], ev["name"], ev["detail"], strict=True):
        if pd.isna(pid):
            continue
        try:
            d = json.loads(detail) or {}
        except (TypeError, ValueError):
            d = {}
        out[int(pid)] = {"server": str(name), **(d if isinstance(d, dict) else {})}
    return out


def backlog(ctx: Context) -> tuple[float, float, float | None] | None:
    """(mean, max, mean wait in ms) of the requests waiting in the kernel for the server over the steady
    state: per sampler tick, the accept queues of its listening ports plus its accepted connections with
    unread bytes; the wait by Little's law (waiting / HTTP requests served per second). None where no
    listening socket of the target was sampled."""
    socks = ctx.window("sockets")
    if socks.empty or ctx.seconds <= 0:
        return None
    waiting = num(socks["accept_queue"]) + num(socks["unread"])
    per_tick = pd.Series(np.nan_to_num(waiting), index=socks["ts_ns"].to_numpy()).groupby(level=0).sum()
    mean = float(per_tick.mean())
    req = ctx.requests()
    http = req[req["source"].isin(["asgi", "wsgi"]).to_numpy()] if not req.empty else req
    served = float(weights(http).sum()) / ctx.seconds if not http.empty else 0.0
    return mean, float(per_tick.max()), (mean / served * 1e3 if served > 0 else None)


def _backlog(ctx: Context, out: dict[str, float | None]) -> None:
    b = backlog(ctx)
    if b is not None:
        out["steady.backlog_mean"], out["steady.backlog_max"], out["steady.backlog_wait_ms"] = b


def request_parts(ctx: Context) -> pd.DataFrame:
    """Per found request (ms): pre_handler, to_model, model, post; NaN where a part is not measured."""
    req = ctx.requests()
    found = req[req["source"].isin(["asgi", "wsgi"]).to_numpy()] if not req.empty else req
    cols = ["pre_handler", "to_model", "model", "post"]
    if found.empty:
        return pd.DataFrame(columns=[*cols, "total", "weight"])
    from diag.analysis.latency import queue_wait_ns  # latency imports this module's neighbours

    steps = ctx.window("steps", by_end=True)
    total = num(found["dur_ns"])
    wait = np.clip(np.nan_to_num(found["wait_ns"].to_numpy(dtype=float), nan=0.0), 0, total)
    q = queue_wait_ns(found, steps) if not steps.empty else np.full(len(found), np.nan)
    model = np.full(len(found), np.nan)
    if not steps.empty and np.isfinite(q).any():
        key = pd.Series(steps["dur_ns"].to_numpy(dtype=float),
                        index=pd.MultiIndex.from_arrays([steps["pid"].to_numpy(), steps["ts_ns"].to_numpy()]))
        key = key[~key.index.duplicated()]
        start = found["ts_ns"].to_numpy(dtype=np.int64) + np.nan_to_num(q, nan=0).astype(np.int64)
        idx = pd.MultiIndex.from_arrays([found["pid"].to_numpy(), start])
        model = key.reindex(idx).to_numpy(dtype=float)
    served = np.isfinite(q) & np.isfinite(model)
    to_model = np.where(served, np.clip(q - wait, 0, None), np.nan)
    model = np.where(served, np.clip(model, 0, total - wait - np.nan_to_num(to_model)), np.nan)
    handler_rest = total - wait
    post = np.where(served, np.clip(handler_rest - to_model - model, 0, None), handler_rest)
    return pd.DataFrame({"pre_handler": wait / 1e6, "to_model": to_model / 1e6, "model": model / 1e6,
                         "post": post / 1e6, "total": total / 1e6, "weight": weights(found)})


PART_WORDS = {"backlog": "in the kernel's backlog", "pre_handler": "before the handler", "to_model": "handler to model",
              "model": "model", "post": "after the model"}


def parts_summary(ctx: Context) -> list[dict[str, float | str]]:
    """The measured parts of request time: part, words, mean_ms, share (of all request time)."""
    p = request_parts(ctx)
    if p.empty:
        return []
    # the backlog is a mean per request (Little's law), so every request gets it: total time grows by it
    found = backlog(ctx)
    b = found[2] if found is not None else None
    p["backlog"] = b if b else np.nan
    w = p["weight"].to_numpy(dtype=float)
    tot = float(((p["total"].to_numpy() + (b or 0.0)) * w).sum())
    rows = []
    for part, words in PART_WORDS.items():
        v = p[part].to_numpy(dtype=float)
        ok = np.isfinite(v)
        if not ok.any() or tot <= 0:
            continue
        rows.append({"part": part, "words": words, "mean_ms": float(np.average(v[ok], weights=w[ok])),
                     "share": float((v[ok] * w[ok]).sum()) / tot})
    return rows


def _parts(ctx: Context, found: pd.DataFrame, out: dict[str, float | None]) -> None:
    http = found[found["source"].isin(["asgi", "wsgi"]).to_numpy()] if not found.empty else found
    if http.empty:
        return
    w = weights(http)
    wait = http["wait_ns"].to_numpy(dtype=float)
    ok = np.isfinite(wait)
    if ok.any():
        out["steady.pre_handler_wait_p50_ms"] = weighted_percentile(wait[ok], w[ok], 50) / 1e6
        out["steady.pre_handler_wait_p99_ms"] = weighted_percentile(wait[ok], w[ok], 99) / 1e6
        # Requests waiting in the kernel before the server took them are queued too: a mean per request
        # (Little's law) that the server's own timing cannot see, added to the measured wait and latency.
        kernel_ns = (out.get("steady.backlog_wait_ms") or 0.0) * 1e6
        n = float(w[ok].sum())
        tot = float((num(http["dur_ns"])[ok] * w[ok]).sum()) + kernel_ns * n
        waited = float((wait[ok] * w[ok]).sum()) + kernel_ns * n
        out["steady.pre_handler_wait_share"] = waited / tot if tot > 0 else None
        out["steady.pre_handler_wait_mean_ms"] = waited / n / 1e6 if n > 0 else None
    h = http["handler_ns"].to_numpy(dtype=float)
    ok = np.isfinite(h)
    if ok.any():
        out["steady.handler_p50_ms"] = weighted_percentile(h[ok], w[ok], 50) / 1e6
        out["steady.handler_p99_ms"] = weighted_percentile(h[ok], w[ok], 99) / 1e6
    for row in parts_summary(ctx):
        out[f"steady.part_{row['part']}_share"] = float(row["share"])


def stage_summary(ctx: Context) -> list[dict[str, float | str]]:
    """diag.stage()/NVTX stages inside requests: stage, count, mean_ms, share of request time; biggest first.

    Only the outermost stages of each process count, so nested stages do not add twice.
    """
    req = ctx.requests()
    rg = ctx.window("ranges", by_end=True)
    if req.empty or rg.empty:
        return []
    st = rg[(rg["kind"] != "request").to_numpy()]
    if st.empty:
        return []
    r_ts = req["ts_ns"].to_numpy(dtype=np.int64)
    r_end = r_ts + req["dur_ns"].to_numpy(dtype=np.int64)
    s_ts = st["ts_ns"].to_numpy(dtype=np.int64)
    inside = intervals.inside(s_ts, r_ts, r_end) & np.isin(st["pid"].to_numpy(), req["pid"].unique())
    if "rid" in st.columns:
        inside |= pd.to_numeric(st["rid"], errors="coerce").fillna(0).to_numpy() > 0
    st = st[inside]
    if st.empty:
        return []
    depth = pd.to_numeric(st["depth"], errors="coerce").fillna(0).to_numpy() if "depth" in st.columns \
        else np.zeros(len(st))
    # outermost stages: the smallest depth a stage has in its process (a request range may hold depth 0)
    mind = pd.Series(depth).groupby(st["pid"].to_numpy()).transform("min").to_numpy()
    st = st[depth == mind]
    w = weights(st)
    dur = num(st["dur_ns"])
    total = float((num(req["dur_ns"]) * weights(req)).sum())
    rows = []
    for name, g in pd.DataFrame({"name": st["name"].to_numpy(), "dur": dur, "w": w}).groupby("name"):
        rows.append({"stage": str(name), "count": float(g["w"].sum()),
                     "mean_ms": float(np.average(g["dur"], weights=g["w"])) / 1e6,
                     "share": float((g["dur"] * g["w"]).sum()) / total if total > 0 else 0.0})
    return sorted(rows, key=lambda r: -float(r["share"]))


def _handler_blocked(ctx: Context, found: pd.DataFrame, out: dict[str, float | None]) -> None:
    """steady.handler_blocked_share, for thread-per-request (WSGI) handlers only (an ASGI handler's
    thread is the event loop, idle while its request awaits: the loop rules judge that thread).

    Per request thread: the handler time it was neither on a CPU nor queued for one (its CPU counters;
    the thread does little but handle requests), less the time in the model (a GPU sync is the model's)
    and in waits on the program's own threads or queues (a batcher's result: stack samples), over the
    handler time. py-spy's idle flag is not used: it misses a thread asleep in time.sleep.
    """
    wsgi = found[(found["source"] == "wsgi").to_numpy()] if not found.empty else found
    if wsgi.empty or ctx.seconds <= 0:
        return
    cpu, runq = threads.thread_cpu(ctx), threads.thread_cpu(ctx, runq=True)
    steps = ctx.window("steps")
    st = ctx.window("stacks")
    handler_s = blocked_s = 0.0
    for (pid, tid), g in wsgi.groupby([wsgi["pid"].to_numpy(), wsgi["tid"].to_numpy()]):
        if (pid, tid) not in cpu:
            continue
        w = weights(g)
        start = g["ts_ns"].to_numpy(dtype=np.int64) + np.nan_to_num(num(g["wait_ns"]), nan=0).astype(np.int64)
        end = g["ts_ns"].to_numpy(dtype=np.int64) + np.nan_to_num(num(g["dur_ns"]), nan=0).astype(np.int64)
        handler = float(((end - start) * w).sum()) / 1e9
        mine = steps[(steps["pid"] == pid).to_numpy() & (steps["tid"] == tid).to_numpy()] if not steps.empty else steps
        model = float((num(mine["dur_ns"]) * weights(mine)).sum()) / 1e9 if not mine.empty else 0.0
        own_wait = 0.0
        if not st.empty:
            s = st[(st["pid"] == pid).to_numpy() & (st["tid"] == tid).to_numpy()]
            s0, s1 = intervals.merge(start, end)
            s = s[intervals.inside(s["ts_ns"].to_numpy(dtype=np.int64), s0, s1)]
            if len(s) >= 20:
                own_wait = handler * float(stacks.thread_wait_frames(s["stack"]).mean())
        off = handler - (cpu[(pid, tid)] + runq.get((pid, tid), 0.0)) * ctx.seconds
        handler_s += handler
        blocked_s += max(0.0, off - model - own_wait)
    if handler_s > 0:
        out["steady.handler_blocked_share"] = min(1.0, blocked_s / handler_s)


def _stages(ctx: Context, req: pd.DataFrame, out: dict[str, float | None]) -> None:
    rows = stage_summary(ctx)
    if rows:
        out["steady.top_stage_share"] = float(rows[0]["share"])


def _busiest_loop(ctx: Context) -> tuple[int, int, np.ndarray] | None:
    lag = ctx.window("loop_lag")
    if lag.empty:
        return None
    best = None
    for (pid, tid), g in lag.groupby(["pid", "tid"]):
        v = num(g["lag_ns"])
        v = v[np.isfinite(v)]
        held = float(np.clip(v - IDLE_LAG_NS, 0, None).sum())
        if best is None or held > best[0]:
            best = (held, int(pid), int(tid), v)
    return None if best is None else (best[1], best[2], best[3])


def _loop(ctx: Context, out: dict[str, float | None]) -> None:
    b = _busiest_loop(ctx)
    if b is None or not len(b[2]):
        return
    pid, tid, v = b
    out["steady.loop_lag_p50_ms"] = float(np.percentile(v, 50)) / 1e6
    out["steady.loop_lag_p99_ms"] = float(np.percentile(v, 99)) / 1e6
    out["steady.loop_lag_max_ms"] = float(v.max()) / 1e6
    # a tick due at a random moment runs late exactly when the loop is held then: the share
    # of late ticks is the share of time the loop was held (the lag itself is only the rest of one hold)
    blocked = float((v > IDLE_LAG_NS).mean())
    out["steady.loop_blocked_share"] = blocked
    out["steady.loop_held_share"] = blocked
    cpu = threads.thread_cpu(ctx).get((pid, tid))
    out["steady.loop_thread_cpu"] = cpu
    if cpu is not None:
        # off CPU and not waiting for a core: blocked in a call
        runq = threads.thread_cpu(ctx, runq=True).get((pid, tid)) or 0.0
        out["steady.loop_thread_demand"] = cpu + runq
        out["steady.loop_blocked_offcpu_share"] = max(0.0, blocked - cpu - runq)
        # a loop thread that runs (or waits for a core) is running a callback: the loop is held. A
        # tick is late by over 5 ms only in the part of a hold more than 5 ms before its end, so the
        # probe sees ~40% of 12 ms holds; the thread's own work share is not cut that way.
        out["steady.loop_held_share"] = max(blocked, min(1.0, cpu + runq))


def _model(ctx: Context, server_pids: set[int], out: dict[str, float | None]) -> None:
    steps = ctx.steps(cols=["ts_ns", "dur_ns", "pid", "tid", "batch"])
    cpu = threads.thread_cpu(ctx)
    r = threads.roles(ctx)
    execs = r[r["role"].isin(["executor", "loop_executor"]).to_numpy()]
    ex_keys = set(zip(ids(execs["pid"]), ids(execs["tid"]), strict=True))
    if ex_keys:
        out["steady.executor_cpu"] = float(sum(cpu.get(k, 0.0) for k in ex_keys))
    if steps.empty:
        return
    st = steps["ts_ns"].to_numpy(dtype=np.int64)
    busy = intervals.clipped_total(st, st + steps["dur_ns"].to_numpy(dtype=np.int64), ctx.t0, ctx.t1)
    out["steady.model_busy_share"] = min(1.0, busy / 1e9 / ctx.seconds)
    step_keys = set(zip(ids(steps["pid"]), ids(steps["tid"]), strict=True))
    on_exec = bool(step_keys & ex_keys)
    out["steady.model_on_executor"] = 1.0 if on_exec else 0.0
    batch = num(steps["batch"])
    out["steady.batcher_seen"] = 1.0 if on_exec or bool((batch > 1).any()) else 0.0


def member_requests(found: pd.DataFrame) -> pd.Series:
    """Requests (weighted) per process."""
    if found.empty:
        return pd.Series(dtype=float)
    return pd.Series(weights(found)).groupby(found["pid"].to_numpy()).sum()


def _workers(ctx: Context, found: pd.DataFrame, out: dict[str, float | None]) -> None:
    per = member_requests(found[found["source"].isin(["asgi", "wsgi"]).to_numpy()] if not found.empty else found)
    roles = server_roles(ctx.run.table("events"))
    workers = [p for p, d in roles.items() if d.get("role") == "worker"]
    n = len(set(workers) | set(per.index.tolist())) if workers else len(per)
    out["steady.server_workers"] = float(n)
    if n >= 2 and len(per):
        counts = per.reindex(sorted(set(workers) | set(per.index.tolist()))).fillna(0.0)
        mean = float(counts.mean())
        out["steady.worker_request_imbalance"] = float(counts.max()) / mean if mean > 0 else None


def _reads(ctx: Context, req: pd.DataFrame, server_pids: set[int], out: dict[str, float | None]) -> None:
    host = ctx.run.table("host")
    pids = server_pids | set(ids(req["pid"]) if not req.empty else [])
    if host.empty or not pids:
        return
    total, seen = 0.0, False
    for _, g in host[host["pid"].isin(list(pids)).to_numpy()].groupby("pid"):
        ts, v = g["ts_ns"].to_numpy(dtype=np.int64), num(g["read_bytes"])
        ok = np.isfinite(v)
        ts, v = ts[ok], v[ok]
        if len(ts) < 2:
            continue
        a, b = max(ctx.t0, int(ts[0])), min(ctx.t1, int(ts[-1]))
        va, vb = intervals.value_at(ts, v, a), intervals.value_at(ts, v, b)
        if b <= a or va is None or vb is None:
            continue
        seen = True
        total += max(0.0, vb - va) * ctx.seconds / ((b - a) / 1e9)  # scaled to the whole window
    if not seen:
        return
    out["steady.serving_disk_read_bps"] = total / ctx.seconds
    n = float(weights(req).sum()) if not req.empty else 0.0
    if n > 0:
        out["steady.request_read_bytes"] = total / n


def _generate(ctx: Context, out: dict[str, float | None]) -> None:
    g = ctx.window("requests")
    if g.empty or "source" not in g.columns:
        return
    g = g[(g["source"] == "generate").to_numpy()]
    if g.empty:
        return
    w = weights(g)
    out["steady.generate_calls"] = float(w.sum())
    ttft = num(g["ttft_ns"]) if "ttft_ns" in g.columns else np.full(len(g), np.nan)
    ok = np.isfinite(ttft) & (ttft >= 0)
    if ok.any():
        out["steady.ttft_p50_ms"] = weighted_percentile(ttft[ok], w[ok], 50) / 1e6
        out["steady.ttft_p99_ms"] = weighted_percentile(ttft[ok], w[ok], 99) / 1e6
    tokens: list[float] = []
    for text in g["token_ns"] if "token_ns" in g.columns else []:
        try:
            tokens += [float(x) for x in json.loads(text)] if text else []
        except (TypeError, ValueError):
            continue
    if tokens:
        out["steady.tpot_p50_ms"] = float(np.median(tokens)) / 1e6
    dur = num(g["dur_ns"])
    if {"tokens_out", "batch"} <= set(g.columns):
        n = np.clip(num(g["tokens_out"]), 0, None) * np.clip(num(g["batch"]), 1, None)
        out["steady.gen_tokens_per_s"] = float(np.nansum(n * w)) / ctx.seconds
    total = float(np.nansum(dur * w))
    if total > 0 and "prefill_ns" in g.columns:
        pre = np.clip(num(g["prefill_ns"]), 0, None)
        out["steady.prefill_share"] = float(np.nansum(pre * w)) / total
        if ok.any():
            out["steady.decode_share"] = float(np.nansum(np.clip(dur - np.nan_to_num(ttft), 0, None) * w)) / total


def names(ctx: Context) -> dict[str, str]:
    """The names rule templates may use (NAMES): hot frames, the model's thread, the biggest stage."""
    out = dict.fromkeys(NAMES, UNNAMED)
    loops = threads.by_role(ctx, "event_loop")
    b = _busiest_loop(ctx)
    if b is not None:
        loops = [t for t in loops if (t.pid, t.tid) == (b[0], b[1])] or loops
    hot = [t for t in loops if t.hot_frame]
    if hot:
        out["steady.loop_hot_frame"] = max(hot, key=lambda t: t.samples).hot_frame
    req_threads = [t for t in threads.by_role(ctx, "request_thread") if t.hot_frame] or hot
    if req_threads:
        out["steady.request_hot_frame"] = max(req_threads, key=lambda t: t.samples).hot_frame
    stepping = {(t.pid, t.tid) for t in threads.by_role(ctx, "stepping")}
    roles_of = [t.role for t in threads.threads(ctx) if (t.pid, t.tid) in stepping and t.role != "stepping"]
    out["steady.model_thread_role"] = (threads.ROLE_WORDS.get(_most_common(roles_of), "stepping thread")
                                       if roles_of else "stepping thread")
    stages = stage_summary(ctx)
    out["steady.top_stage"] = str(stages[0]["stage"]) if stages else "(no stage)"
    return out


def _most_common(items: list[str]) -> str:
    return max(sorted(set(items)), key=items.count)


def summary(ctx: Context) -> dict[str, object]:
    """What the views show of a server (no arithmetic left for them): request time by measured
    part and by stage, and the threads by role with their CPU and hot frame. {} when nothing serves.
    """
    req = ctx.requests()
    roles = threads.roles(ctx)
    if req.empty and not (roles["role"] != "stepping").any():
        return {}
    table = threads.role_table(ctx)
    return {
        "parts": parts_summary(ctx),
        "stages": stage_summary(ctx),
        "threads": [{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
                    for row in table.to_dict("records")],
    }
