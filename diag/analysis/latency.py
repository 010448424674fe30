"""Step and request latency, throughput, batch sizes, and request queue wait vs service time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import PERCENTILES, Metric
from diag.analysis.columns import weighted_percentile, weighted_percentiles, weights
from diag.analysis.context import Context, complete, num, steady_context
from diag.analysis.phases import Phases, compute_phases
from diag.store.run import Run

# The latency percentiles every view shows, and the metrics they come from.
# What the latency numbers cover, in words a view can show beside them.
SCOPE = "steady state; steps inside kernel-profiling windows left out"

METRICS = (
    [Metric("steady.steps", "count", "Model calls (steps) in the steady state, all threads.")]
    + [Metric(f"steady.step_p{q}_ms", "ms", f"Step latency, {q}th percentile (profiled steps excluded).") for q in PERCENTILES]
    + [
        Metric("steady.step_mean_ms", "ms", "Mean step latency (profiled steps excluded)."),
        Metric("steady.steps_per_s", "per_s", "Steps per second over the steady state."),
        Metric("steady.samples_per_s", "per_s", "Samples (sum of batch sizes) per second over the steady state."),
        Metric("steady.batch_p50", "count", "Median batch size of the steps (first dimension of the first input)."),
        Metric("steady.batch_max", "count", "Largest batch size seen in the steady state."),
        Metric("steady.distinct_shapes", "count", "Distinct input shapes seen by the steps in the steady state."),
        Metric("steady.input_rank", "count", "Dimensions of the steps' first input (median; 4 for images)."),
        Metric("steady.fp32_step_fraction", "ratio", "Fraction of steps with a floating first input whose input is float32 (integer inputs such as token ids are left out)."),
        Metric("steady.requests", "count", "Requests in the steady state: found by the server hooks (ASGI, WSGI, generate) or marked (diag.request(), NVTX `request`)."),
    ]
    + [Metric(f"steady.request_p{q}_ms", "ms", f"Request latency, {q}th percentile.") for q in PERCENTILES]
    + [
        Metric("steady.requests_per_s", "per_s", "Requests completed per second over the steady state."),
        Metric("steady.queue_wait_p50_ms", "ms", "Median time a request waits before its first step."),
        Metric("steady.queue_wait_p90_ms", "ms", "90th percentile of the time a request waits before its first step."),
        Metric("steady.service_p50_ms", "ms", "Median time from a request's first step to its completion."),
        Metric("steady.queue_wait_ratio", "factor", "Mean queue wait divided by mean service time (> 1: requests wait longer than they are served)."),
        Metric("steady.queue_wait_share", "ratio", "Share of request latency spent waiting before the first step."),
        Metric("steady.request_concurrency", "count", "Mean number of requests in flight."),
        Metric("steady.queue_behind_model_share", "ratio", "Share of queue wait during which the model was running other steps (waiting behind the model, not on the request's own pre-processing)."),
    ]
)


@dataclass(frozen=True)
class Latencies:
    """The latencies of one kind of call (step or request), each standing for `weight` calls."""

    kind: str  # "step" or "request"
    ms: np.ndarray  # no NaN
    weight: np.ndarray

    def summary(self) -> dict[str, float | None]:
        """count (calls, weighted), mean_ms, p50_ms ... p99_ms, max_ms: None where there is no call."""
        if not len(self.ms):
            return {"count": 0.0, "mean_ms": None, **{f"p{q}_ms": None for q in PERCENTILES}, "max_ms": None}
        pct = weighted_percentiles(self.ms, self.weight, PERCENTILES)
        return {"count": float(self.weight.sum()), "mean_ms": float(np.average(self.ms, weights=self.weight)),
                **{f"p{q}_ms": p for q, p in zip(PERCENTILES, pct, strict=True)},
                "max_ms": float(self.ms.max())}


def latencies(ctx: Context) -> dict[str, Latencies]:
    """Step and request latencies in the context's window (the steady state), the one way every view uses.

    Each row counts for the calls it stands for (the recorder keeps 1 in k rows
    of long tables); steps inside kernel-profiling windows are left out (CUPTI
    slows them), except in an imported trace, where every step is profiled.
    """
    steps = ctx.steps(profiled=False, cols=["dur_ns", "weight"])
    requests = ctx.requests()
    out = {}
    for kind, df in (("step", steps), ("request", requests)):
        ms = num(df["dur_ns"]) / 1e6 if not df.empty else np.array([])
        ok = ~np.isnan(ms)
        out[kind] = Latencies(kind, ms[ok], weights(df)[ok] if len(ms) else np.array([]))
    return out


def run_latencies(run: Run, phases: Phases | None = None) -> dict[str, Latencies]:
    """`latencies` over the steady state of `run` (its phases are found when not given)."""
    phases = phases or compute_phases(run)
    return latencies(steady_context(run, phases))


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    T = ctx.seconds
    if T <= 0:
        return out
    lat = latencies(ctx)
    for kind in ("step", "request"):
        if len(lat[kind].ms):
            s = lat[kind].summary()
            out.update({f"steady.{kind}_p{q}_ms": s[f"p{q}_ms"] for q in PERCENTILES})
            if kind == "step":
                out["steady.step_mean_ms"] = s["mean_ms"]
    all_steps = ctx.steps()
    if not all_steps.empty:
        w_all = weights(all_steps)
        out["steady.steps"] = float(w_all.sum())
        out["steady.steps_per_s"] = float(w_all.sum()) / T
        batch = num(all_steps["batch"])
        known = batch > 0
        if known.any():
            out["steady.batch_p50"] = weighted_percentile(batch[known], w_all[known], 50)
            out["steady.batch_max"] = float(batch[known].max())
            out["steady.samples_per_s"] = float((batch[known] * w_all[known]).sum()) / T
        shapes = all_steps["shapes"].value_counts(dropna=True)
        if len(shapes):
            out["steady.distinct_shapes"] = float(len(shapes))
            out["steady.input_rank"] = _input_rank(shapes)
        # integer inputs (token ids) say nothing about the model's precision: floating inputs only
        dtypes = {str(d).lower().replace("torch.", ""): n for d, n in all_steps["dtype"].value_counts(dropna=True).items()}
        floating = {d: n for d, n in dtypes.items() if d.startswith(("float", "bfloat", "half", "double"))}
        if floating:
            fp32 = sum(n for d, n in floating.items() if d in ("float32", "float"))
            out["steady.fp32_step_fraction"] = float(fp32) / float(sum(floating.values()))
    _requests(ctx, out)
    return out


def _requests(ctx: Context, out: dict[str, float | None]) -> None:
    req = ctx.requests()
    if req.empty:
        return
    T = ctx.seconds
    rw = weights(req)
    dur_ms = num(req["dur_ns"]) / 1e6
    out["steady.requests"] = float(rw.sum())
    out["steady.requests_per_s"] = float(rw.sum()) / T
    out["steady.request_concurrency"] = float(np.nansum(dur_ms * rw)) / 1e3 / T
    steps = _StepArrays.of(complete(ctx.run, "steps"))
    wait = queue_wait_ns(req, steps)
    ok = ~np.isnan(wait)
    if ok.sum() == 0:
        return
    total = num(req["dur_ns"])[ok]
    rw = rw[ok]
    w = np.clip(wait[ok], 0, total)
    service = total - w
    p50, p90 = weighted_percentiles(w, rw, (50, 90))
    out["steady.queue_wait_p50_ms"] = p50 / 1e6  # type: ignore[operator]
    out["steady.queue_wait_p90_ms"] = p90 / 1e6  # type: ignore[operator]
    out["steady.service_p50_ms"] = weighted_percentile(service, rw, 50) / 1e6
    tw, ts_ = float((w * rw).sum()), float((total * rw).sum())
    out["steady.queue_wait_share"] = tw / ts_ if ts_ > 0 else None
    sv = float((service * rw).sum())
    out["steady.queue_wait_ratio"] = tw / sv if sv > 0 else None
    out["steady.queue_behind_model_share"] = _behind_model(req[ok], w, steps)


def _behind_model(req: pd.DataFrame, wait: np.ndarray, steps: _StepArrays) -> float | None:
    """Share of the requests' queue wait during which their process's model ran (other) steps."""
    total = float(wait.sum())
    if total <= 0:
        return None
    behind = 0.0
    a_all = req["ts_ns"].to_numpy(dtype=np.int64)
    pids = req["pid"].to_numpy()
    for pid, rows in steps.by_pid():
        sel = pids == pid
        if not sel.any():
            continue
        st = steps.ts[rows]
        a = a_all[sel]
        behind += float(intervals.covered(st, st + steps.dur[rows], a, a + wait[sel].astype(np.int64)).sum())
    return behind / total


def queue_wait_ns(req: pd.DataFrame, steps: pd.DataFrame | _StepArrays) -> np.ndarray:
    """Per request: time from arrival to the start of the step that served it (NaN if none).

    A thread that serves its requests one at a time serves each with its first
    step on that thread. A request closed by a thread juggling several (a pool
    thread taking requests that all arrived in one burst) was served by the last
    step of that thread that started inside the request and ended before it
    closed: the thread closes the request after its step. Otherwise (a request handed to a batcher) it is served
    by the last step of its process that ends before the request completes and
    started inside it: the first step in its span would usually be another
    request's, and a step that starts after the request closed cannot have served it.
    """
    out = np.full(len(req), np.nan)
    steps = steps if isinstance(steps, _StepArrays) else _StepArrays.of(steps)
    if not len(steps.ts):
        return out
    r_ts = req["ts_ns"].to_numpy(dtype=np.int64)
    r_end = r_ts + req["dur_ns"].to_numpy(dtype=np.int64)
    r_pid = req["pid"].to_numpy()
    r_tid = req["tid"].to_numpy()
    slack = 1_000_000  # a request may close a moment before the step's own end is recorded
    for pid, rows in steps.by_pid():
        sel = np.flatnonzero(r_pid == pid)
        if not len(sel):
            continue
        rows = rows[np.argsort(steps.ts[rows], kind="quicksort")]  # by start, as sort_values("ts_ns")
        st = steps.ts[rows]
        en = st + steps.dur[rows]
        g_dense = steps.w[rows] == 1
        g_tid = steps.tid[rows]
        # last step (by end) ending before the request completes
        order = np.argsort(en, kind="stable")
        en_sorted, st_by_end = en[order], st[order]
        dense = g_dense[order]  # 1-in-k kept rows: the serving step may be missing
        j = np.searchsorted(en_sorted, r_end[sel] + slack, side="right") - 1
        last_ok = (j >= 0)
        jj = np.clip(j, 0, None)
        last_start = np.where(last_ok, st_by_end[jj], -1)
        last_ok &= (last_start >= r_ts[sel]) & (last_start < r_end[sel])
        last_ok &= dense[jj] & dense[np.clip(jj + 1, 0, len(dense) - 1)]
        out[sel[last_ok]] = (last_start[last_ok] - r_ts[sel][last_ok]).astype(float)
        for tid in _keys(g_tid):
            tsel = sel[r_tid[sel] == tid]
            if not len(tsel):
                continue
            trows = np.flatnonzero(g_tid == tid)
            tst = st[trows]
            tdense = g_dense[trows]
            if _concurrent(r_ts[tsel], r_end[tsel]):
                # several requests open at once on this thread: it closed each right after the
                # step that served it, the last of its steps that started inside the request
                # and ended before it closed
                ten = en[trows]
                order = np.argsort(ten, kind="stable")
                k = np.searchsorted(ten[order], r_end[tsel], side="right") - 1
                ok = k >= 0
                kk = order[np.clip(k, 0, None)]
                last = np.where(ok, tst[kk], -1)
                ok &= (last >= r_ts[tsel]) & (last < r_end[tsel]) & tdense[kk]
                ok &= tdense[order[np.clip(k + 1, 0, len(order) - 1)]]
                out[tsel[ok]] = (last[ok] - r_ts[tsel][ok]).astype(float)
                continue
            # a thread serving its requests one at a time: the first step on it inside the request
            k = np.searchsorted(tst, r_ts[tsel], side="left")
            ok = k < len(tst)
            kk = np.clip(k, 0, len(tst) - 1)
            first = np.where(ok, tst[kk], -1)
            ok &= (first < r_end[tsel]) & tdense[kk] & tdense[np.clip(kk - 1, 0, None)]
            out[tsel[ok]] = (first[ok] - r_ts[tsel][ok]).astype(float)
    return out


@dataclass(frozen=True)
class _StepArrays:
    """The step columns the queue-wait arithmetic reads, as arrays: grouping these by process and
    thread costs nothing next to splitting the whole steps frame (strings and all) per group."""

    ts: np.ndarray
    dur: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    w: np.ndarray  # weights()

    @staticmethod
    def of(steps: pd.DataFrame) -> _StepArrays:
        if steps.empty:
            e = np.array([], dtype=np.int64)
            return _StepArrays(e, e, e, e, np.array([]))
        return _StepArrays(steps["ts_ns"].to_numpy(dtype=np.int64), steps["dur_ns"].to_numpy(dtype=np.int64),
                           steps["pid"].to_numpy(), steps["tid"].to_numpy(), weights(steps))

    def by_pid(self) -> list[tuple[object, np.ndarray]]:
        """(pid, its rows in table order) per process, pids sorted: as groupby("pid") iterates."""
        return [(pid, np.flatnonzero(self.pid == pid)) for pid in _keys(self.pid)]


def _keys(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted, without NaN: groupby's keys."""
    return np.sort(pd.unique(values[pd.notna(values)]))


def _concurrent(starts: np.ndarray, ends: np.ndarray) -> bool:
    """Whether any two of these requests overlap in time (one thread juggling several)."""
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    return bool(len(s) > 1 and np.any(s[1:] < np.maximum.accumulate(e)[:-1]))


def _input_rank(counts: pd.Series) -> float | None:
    """Median number of dimensions of the first input, from counts of shape strings like '[[8,3,224,224]]'."""
    ranks, times = [], []
    for text, count in ((str(k), n) for k, n in counts.items()):
        first = text.lstrip("[ ").split("]")[0] if text.startswith("[[") else ""
        if not first and text.startswith("[["):
            continue
        if first:
            ranks.append(len([d for d in first.split(",") if d.strip()]))
            times.append(int(count))
    # each shape's rank counted as often as the shape occurs (no list as long as the steps)
    return float(np.median(np.repeat(np.array(ranks, dtype=np.int64), times))) if ranks else None
