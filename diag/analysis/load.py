"""Load figures: the client's side (`diag load`, `diag profile --load`) and, where the server was
recorded in the same run, the client and server side of each request together.

Client rows are `load_requests` (ts_ns: when the request was due; latency from then, so
the time it waited for a connection counts); server rows are the requests the ASGI/WSGI
hooks found (`requests`). The hooks record no request header, so the two sides are
matched by time on the one host clock: a client request goes with the first unmatched
server request that arrived after it was sent and ended before its reply came back
(among the next few: requests sent together may arrive swapped). The time before the
handler runs is then the handler's start minus the client's due time: connection,
accept backlog, a busy event loop, the server's own queue. Pure functions; no printing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from diag.analysis.catalog import Metric
from diag.analysis.columns import weighted_percentile
from diag.analysis.context import Context
from diag.analysis.latency import PERCENTILES
from diag.analysis.ranges import run_requests
from diag.store.run import Run

MEASURE = "measure"
SLACK_NS = 2_000_000  # two sides' timestamps may disagree by this much (rounding, clock slew)
LOOKAHEAD = 8  # server rows tried per client request
TAIL_Q = 90  # the tail: requests at or over the client's 90th percentile
SERIES_BINS = 120  # points of the over-time series at most

METRICS = [
    Metric("load.requests", "count", "Requests the load generator sent in its measured time (warm-up left out)."),
    Metric("load.offered_per_s", "per_s", "Requests sent per second of measured load."),
    Metric("load.achieved_per_s", "per_s", "Requests answered without error per second of measured load."),
    Metric("load.error_rate", "ratio", "Share of the load's requests that failed (refused, timeout, 4xx/5xx, redirect...)."),
    Metric("load.client_p50_ms", "ms", "Client latency, median (from when each request was due to its reply)."),
    Metric("load.client_p90_ms", "ms", "Client latency, 90th percentile."),
    Metric("load.client_p95_ms", "ms", "Client latency, 95th percentile."),
    Metric("load.client_p99_ms", "ms", "Client latency, 99th percentile."),
    Metric("load.client_max_ms", "ms", "Client latency, slowest request."),
    Metric("load.in_flight_mean", "count", "Load requests in flight on average over the measured time (client side)."),
    Metric("load.matched_share", "ratio", "Share of the load's answered requests matched to a request the server's hooks recorded."),
    Metric("load.server_p50_ms", "ms", "Server request time (arrival to response end) of the matched requests, median."),
    Metric("load.server_p99_ms", "ms", "Server request time of the matched requests, 99th percentile."),
    Metric("load.handler_p50_ms", "ms", "Handler time of the matched requests, median."),
    Metric("load.handler_p99_ms", "ms", "Handler time of the matched requests, 99th percentile."),
    Metric("load.pre_handler_p50_ms", "ms", "Time before the handler ran (client due time to handler start: connection, accept backlog, event loop, server queue), median."),
    Metric("load.pre_handler_p99_ms", "ms", "Time before the handler ran, 99th percentile."),
    Metric("load.pre_handler_share", "ratio", "Share of the client latency of matched requests spent before the handler ran."),
    Metric("load.tail_pre_handler_share", "ratio", "The same share in the tail (requests at or over the client's p90): what a latency SLO breaks on."),
    Metric("load.gap_p50_ms", "ms", "Client latency minus server request time, median: time the server never saw (before its arrival, network)."),
    Metric("load.gap_p99_ms", "ms", "Client latency minus server request time, 99th percentile."),
    Metric("load.pre_handler_ratio", "factor", "Time before the handler over handler time (medians): above 1, requests wait longer than they are served."),
    Metric("load.slos", "count", "Service-level objectives given (--slo)."),
    Metric("load.slos_broken", "count", "Objectives the load broke."),
    Metric("load.sweep_steps", "count", "Load levels a sweep tried."),
    Metric("load.sweep_best_level", "per_s", "Sweep: the highest offered rate (or concurrency) that met every SLO."),
    Metric("load.sweep_best_per_s", "per_s", "Sweep: requests/s served at that level."),
    Metric("load.sweep_knee_level", "per_s", "Sweep: the level where the p99 latency curve turns up (its knee)."),
]


def result(run: Run) -> dict[str, Any]:
    """The load's result object (diag.load/1) kept in run.json, {} when the run had no load."""
    r = run.manifest.get("load")
    return r if isinstance(r, dict) else {}


def has_load(run: Run) -> bool:
    return bool(result(run)) or not run.table("load_requests").empty


def load_only(run: Run) -> bool:
    """A `diag load` run: the client's side alone, no server recorded."""
    return run.manifest.get("kind") == "load"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f == f else None


def _pct(values: np.ndarray, q: float) -> float | None:
    return weighted_percentile(values, np.ones(len(values)), q) if len(values) else None


def client_rows(run: Run) -> pd.DataFrame:
    """The measured load requests (warm-up left out), sorted by due time."""
    df = run.table("load_requests")
    if df.empty:
        return df
    if "phase" in df.columns:
        df = df[df["phase"].fillna(MEASURE) == MEASURE]
    return df.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def matched(run: Run) -> pd.DataFrame:
    """One row per answered load request (all phases) with its server request, where one was found:
    columns ts_ns, phase, client_ms, server_ms, handler_ms, pre_handler_ms, gap_ms (NaN unmatched)."""
    key = "_diag_load_matched"
    cache = run._cache
    if key in cache:
        return cache[key]
    cols = ["ts_ns", "phase", "client_ms", "server_ms", "handler_ms", "pre_handler_ms", "gap_ms"]
    c = run.table("load_requests")
    if not c.empty:
        c = c[c["error"].isna()] if "error" in c.columns else c
    if c.empty:
        cache[key] = pd.DataFrame({k: pd.Series(dtype="float64") for k in cols})
        return cache[key]
    c = c.sort_values("sent_ns", kind="stable").reset_index(drop=True)
    due = c["ts_ns"].to_numpy(dtype=np.int64)
    sent = pd.to_numeric(c["sent_ns"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    end = pd.to_numeric(c["end_ns"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
    s = run_requests(run)
    if not s.empty:
        s = s[s["source"].isin(["asgi", "wsgi"])]
        s = s[(s["ts_ns"] >= sent.min() - SLACK_NS) & (s["ts_ns"] <= end.max() + SLACK_NS)]
    n = len(c)
    server_ms, handler_ms, pre_ms = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    if not s.empty:
        s = s.sort_values("ts_ns", kind="stable")
        arr = s["ts_ns"].to_numpy(dtype=np.int64)
        dur = s["dur_ns"].to_numpy(dtype=np.int64)
        wait = np.nan_to_num(s["wait_ns"].to_numpy(dtype=float), nan=0.0)
        hnd = s["handler_ns"].to_numpy(dtype=float)
        used = np.zeros(len(s), dtype=bool)
        j = 0
        for i in range(n):
            lo, hi = sent[i] - SLACK_NS, end[i] + SLACK_NS
            while j < len(s) and (used[j] or arr[j] < lo):
                j += 1  # arrived before this request was sent: an earlier one's, or a stray
            k, tried = j, 0
            while k < len(s) and tried < LOOKAHEAD and arr[k] <= hi:
                if not used[k] and arr[k] >= lo and arr[k] + dur[k] <= hi:
                    used[k] = True
                    server_ms[i] = dur[k] / 1e6
                    handler_ms[i] = hnd[k] / 1e6 if hnd[k] == hnd[k] else dur[k] / 1e6
                    pre_ms[i] = max(0.0, (arr[k] + wait[k] - due[i]) / 1e6)
                    break
                k += 1
                tried += 1
    client_ms = pd.to_numeric(c["latency_ms"], errors="coerce").to_numpy(dtype=float)
    out = pd.DataFrame({"ts_ns": due, "phase": c["phase"].to_numpy() if "phase" in c.columns else MEASURE,
                        "client_ms": client_ms, "server_ms": server_ms, "handler_ms": handler_ms,
                        "pre_handler_ms": pre_ms, "gap_ms": client_ms - server_ms})
    cache[key] = out.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    return cache[key]


def compute(ctx: Context) -> dict[str, float | None]:
    """The load.* metrics (whole measured load, not the steady window: the load chose its own)."""
    run = ctx.run
    if not has_load(run):
        return {}
    res = result(run)
    st = res.get("stats") or {}
    out: dict[str, float | None] = {
        "load.requests": _num(st.get("requests")), "load.offered_per_s": _num(st.get("offered_per_s")),
        "load.achieved_per_s": _num(st.get("throughput_per_s")), "load.error_rate": _num(st.get("error_rate")),
        **{f"load.client_p{q}_ms": _num(st.get(f"p{q}_ms")) for q in PERCENTILES},
        "load.client_max_ms": _num(st.get("max_ms")),
    }
    rows = client_rows(run)
    if not st and not rows.empty:  # no result kept (a killed load): figures from the rows
        ok = rows[rows["error"].isna()]["latency_ms"].to_numpy(dtype=float)
        secs = max((rows["end_ns"].max() - rows["ts_ns"].min()) / 1e9, 1e-9)
        out.update({"load.requests": float(len(rows)), "load.offered_per_s": len(rows) / secs,
                    "load.achieved_per_s": len(ok) / secs, "load.error_rate": 1 - len(ok) / len(rows),
                    **{f"load.client_p{q}_ms": _pct(ok, q) for q in PERCENTILES},
                    "load.client_max_ms": float(ok.max()) if len(ok) else None})
    if not rows.empty:
        secs = max((rows["end_ns"].max() - rows["ts_ns"].min()) / 1e9, 1e-9)
        busy = (pd.to_numeric(rows["end_ns"], errors="coerce") - rows["ts_ns"]).clip(lower=0).sum() / 1e9
        out["load.in_flight_mean"] = float(busy / secs)
    checks = res.get("slos") or []
    out["load.slos"] = float(len(checks)) if checks or res else None
    out["load.slos_broken"] = float(sum(not c.get("held") for c in checks)) if checks or res else None
    sweep = res.get("sweep") or {}
    if sweep:
        out.update({"load.sweep_steps": float(len(sweep.get("steps") or [])),
                    "load.sweep_best_level": _num(sweep.get("best_level")),
                    "load.sweep_best_per_s": _num(sweep.get("best_throughput_per_s")),
                    "load.sweep_knee_level": _num(sweep.get("knee_level"))})
    out.update(_sides(run))
    return out


def _sides(run: Run) -> dict[str, float | None]:
    """Client beside server: the matched requests of the measured load."""
    m = matched(run)
    m = m[m["phase"] == MEASURE] if not m.empty else m
    if m.empty:
        return {}
    hit = m[m["server_ms"].notna()]
    out: dict[str, float | None] = {"load.matched_share": len(hit) / len(m)}
    if hit.empty:
        return out
    client = hit["client_ms"].to_numpy(dtype=float)
    pre = hit["pre_handler_ms"].to_numpy(dtype=float)
    handler = hit["handler_ms"].to_numpy(dtype=float)
    tail = client >= (np.percentile(client, TAIL_Q) if len(client) else 0)
    out.update({
        "load.server_p50_ms": _pct(hit["server_ms"].to_numpy(dtype=float), 50),
        "load.server_p99_ms": _pct(hit["server_ms"].to_numpy(dtype=float), 99),
        "load.handler_p50_ms": _pct(handler, 50), "load.handler_p99_ms": _pct(handler, 99),
        "load.pre_handler_p50_ms": _pct(pre, 50), "load.pre_handler_p99_ms": _pct(pre, 99),
        "load.pre_handler_share": float(pre.sum() / client.sum()) if client.sum() > 0 else None,
        "load.tail_pre_handler_share": (float(pre[tail].sum() / client[tail].sum())
                                        if client[tail].sum() > 0 else None),
        "load.gap_p50_ms": _pct(hit["gap_ms"].to_numpy(dtype=float), 50),
        "load.gap_p99_ms": _pct(hit["gap_ms"].to_numpy(dtype=float), 99),
    })
    h50 = out["load.handler_p50_ms"]
    if h50 and h50 > 0 and out["load.pre_handler_p50_ms"] is not None:
        out["load.pre_handler_ratio"] = out["load.pre_handler_p50_ms"] / h50
    return out


# -- what the views show (plain data; views only format it) -------------------------------------------

SIDES = (("client", "client latency", "client_ms"), ("server", "server request time", "server_ms"),
         ("handler", "handler", "handler_ms"), ("pre_handler", "before the handler", "pre_handler_ms"),
         ("gap", "client minus server", "gap_ms"))


def percentile_table(run: Run) -> list[dict[str, Any]]:
    """Client and server percentiles in one table: one row per side (ms), measured load only.

    The client row covers every answered request; the server rows, the matched ones.
    """
    m = matched(run)
    m = m[m["phase"] == MEASURE] if not m.empty else m
    if m.empty:
        return []
    rows = []
    for key, label, col in SIDES:
        v = m[col].to_numpy(dtype=float)
        v = v[~np.isnan(v)]
        if not len(v):
            continue
        rows.append({"side": key, "label": label, "count": int(len(v)),
                     **{f"p{q}_ms": _pct(v, q) for q in PERCENTILES}, "max_ms": float(v.max())})
    return rows


def over_time(run: Run) -> dict[str, list[float]]:
    """Requests/s answered and requests in flight over the load (client side), and the server's
    requests/s where it was recorded: {t_s, sent_per_s, done_per_s, in_flight, server_per_s}."""
    c = run.table("load_requests")
    if c.empty:
        return {}
    t0 = int(c["ts_ns"].min())
    end = pd.to_numeric(c["end_ns"], errors="coerce").fillna(c["ts_ns"]).to_numpy(dtype=np.int64)
    t1 = int(max(end.max(), t0 + 1))
    span = (t1 - t0) / 1e9
    width = max(0.1, span / SERIES_BINS)
    edges = t0 + (np.arange(int(np.ceil(span / width)) + 1) * width * 1e9).astype(np.int64)
    due = c["ts_ns"].to_numpy(dtype=np.int64)
    sent = np.histogram(due, edges)[0] / width
    done = np.histogram(end, edges)[0] / width
    mids = edges[:-1] + int(width * 5e8)
    # in flight at each bin's middle: due at or before it, not yet answered
    in_flight = (np.searchsorted(np.sort(due), mids, side="right")
                 - np.searchsorted(np.sort(end), mids, side="right"))
    out = {"t_s": [round(float(run.seconds(x)), 3) for x in mids], "sent_per_s": sent.tolist(),
           "done_per_s": done.tolist(), "in_flight": in_flight.astype(float).tolist()}
    s = run_requests(run)
    if not s.empty:
        s = s[s["source"].isin(["asgi", "wsgi"])]
        if not s.empty:
            out["server_per_s"] = (np.histogram(s["ts_ns"].to_numpy(dtype=np.int64), edges)[0] / width).tolist()
    return out


def sweep_rows(run: Run) -> list[dict[str, Any]]:
    """The sweep's steps by level: level, throughput, errors, percentiles (ms), held."""
    sw = (result(run).get("sweep") or {}).get("steps")
    if not sw:
        df = run.table("load_sweep")
        sw = df.to_dict("records") if not df.empty else []
    keys = ("level", "offered_per_s", "throughput_per_s", "error_rate", "p50_ms", "p90_ms", "p95_ms", "p99_ms",
            "max_ms", "held")
    return [{k: s.get(k) for k in keys} for s in sorted(sw, key=lambda s: s.get("level") or 0)]


def summary(run: Run) -> dict[str, Any]:
    """What views show of the load: settings, SLO checks, the sweep, the two sides, the series.
    {} when the run had no load."""
    if not has_load(run):
        return {}
    res = result(run)
    settings = res.get("settings") or (run.manifest.get("options") or {}).get("load") or {}
    sweep = res.get("sweep") or {}
    return {
        "load_only": load_only(run), "url": settings.get("url"), "mode": settings.get("mode"),
        "rate": settings.get("rate"), "concurrency": settings.get("concurrency"),
        "errors_by_kind": {k: v for k, v in ((res.get("stats") or {}).get("errors_by_kind") or {}).items() if v},
        "slos": list(res.get("slos") or []), "problem": res.get("problem") or "",
        "sweep": {"unit": sweep.get("unit"), "best_level": sweep.get("best_level"),
                  "knee_level": sweep.get("knee_level"), "steps": sweep_rows(run)} if sweep else {},
        "sides": percentile_table(run), "over_time": over_time(run),
    }
