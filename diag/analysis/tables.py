"""Tables for views: latency, slowest steps, stacks, kernels, time breakdown.

Pure functions from a Run (and phases) to small DataFrames that a view can
show as they are. Units are in the column names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from diag.analysis.latency import PERCENTILES, run_latencies
from diag.analysis.phases import Phase, Phases
from diag.analysis.ranges import run_requests
from diag.analysis.stacks import model_frames
from diag.store.run import Run


def _requests(run: Run) -> pd.DataFrame:
    return run_requests(run)


def latency_values(run: Run, kind: str = "step", phases: Phases | None = None) -> np.ndarray:
    """Latencies in ms of the steps (`kind="step"`) or requests (`kind="request"`) that
    `latency_summary` covers: steady state, profiled steps left out (latency.SCOPE)."""
    return run_latencies(run, phases)[kind].ms


def latency_summary(run: Run, phases: Phases | None = None) -> pd.DataFrame:
    """One row per kind (step, request) with count, mean, percentiles and max, in ms.

    The numbers are the steady.step_* / steady.request_* metrics' (latency.latencies):
    steady state, weighted, profiled steps left out. `count` is the calls they cover.
    """
    rows = [{"kind": kind, **lat.summary()} for kind, lat in run_latencies(run, phases).items() if len(lat.ms)]
    for row in rows:
        row["count"] = int(round(row["count"]))
    return pd.DataFrame(rows, columns=["kind", "count", "mean_ms", *[f"p{p}_ms" for p in PERCENTILES], "max_ms"])


def queue_vs_service(run: Run) -> pd.DataFrame:
    """Per request: queue wait (arrival to the step that served it) and service time, in ms.

    The matching of requests to steps is analysis's (latency.queue_wait_ns), so the
    views show the numbers the verdict used; a request with no step has NaN queue.
    """
    from diag.analysis.latency import queue_wait_ns

    req = _requests(run)
    cols = ["t_s", "latency_ms", "queue_ms", "service_ms"]
    if req.empty:
        return pd.DataFrame(columns=cols)
    req = req.sort_values("ts_ns").reset_index(drop=True)
    queue = pd.Series(queue_wait_ns(req, run.table("steps")) / 1e6, index=req.index)
    latency = req["dur_ns"] / 1e6
    return pd.DataFrame({"t_s": run.seconds(req["ts_ns"]), "latency_ms": latency, "queue_ms": queue,
                         "service_ms": latency - queue})


def slowest(run: Run, kind: str = "step", n: int = 20) -> pd.DataFrame:
    """The `n` slowest steps or requests, slowest first."""
    if kind == "request":
        q = queue_vs_service(run)
        return q.sort_values("latency_ms", ascending=False).head(n).reset_index(drop=True)
    steps = run.table("steps")
    if steps.empty:
        return pd.DataFrame(columns=["t_s", "latency_ms", "gpu_ms", "batch", "model", "syncs"])
    top = steps.nlargest(n, "dur_ns")
    gpu_ms = pd.to_numeric(top["gpu_ns"], errors="coerce")
    return pd.DataFrame({"t_s": run.seconds(top["ts_ns"]), "latency_ms": top["dur_ns"] / 1e6,
                         "gpu_ms": gpu_ms.where(gpu_ms >= 0) / 1e6, "batch": top["batch"],
                         "model": top["model"], "syncs": top["syncs"]}).reset_index(drop=True)


def _phase_of(run: Run, ts_ns: pd.Series, phases: Sequence[Phase]) -> pd.Series:
    t = run.seconds(ts_ns)
    out = pd.Series("", index=ts_ns.index, dtype=object)
    for p in phases:
        out[(t >= p.start_s) & (t < p.end_s)] = p.name
    return out




def hot_frames(run: Run, phases: Sequence[Phase] = (), n: int = 30) -> pd.DataFrame:
    """Hottest leaf frames per phase, with whether they ran inside the model.

    Columns: phase, frame, self_s, share (of the phase's sampled time), in_model.
    Idle samples (threads waiting) are left out.
    """
    cols = ["phase", "frame", "self_s", "share", "in_model"]
    st = run.table("stacks")
    if st.empty:
        return pd.DataFrame(columns=cols)
    st = st[~st["idle"].fillna(False).astype(bool)] if "idle" in st else st
    if st.empty:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame({
        "phase": _phase_of(run, st["ts_ns"], phases) if phases else "run",
        "frame": st["stack"].str.rsplit(";", n=1).str[-1],
        "in_model": model_frames(st["stack"]),  # the same test the analysis uses
        "self_s": st["dur_ns"] / 1e9,
    })
    agg = df.groupby(["phase", "frame", "in_model"], as_index=False)["self_s"].sum()
    agg["share"] = agg["self_s"] / agg.groupby("phase")["self_s"].transform("sum")
    agg = agg.sort_values(["phase", "self_s"], ascending=[True, False])
    return agg.groupby("phase").head(n).reset_index(drop=True)[cols]


def stack_tree(run: Run, phase: Phase | None = None, max_nodes: int = 2000) -> pd.DataFrame:
    """Stacks as a tree for an icicle chart: id (path), parent, label, value_s.

    Nodes are kept hottest-first up to `max_nodes` so the chart stays small.
    """
    cols = ["id", "parent", "label", "value_s"]
    st = run.table("stacks")
    if st.empty:
        return pd.DataFrame(columns=cols)
    if phase is not None:
        t = run.seconds(st["ts_ns"])
        st = st[(t >= phase.start_s) & (t < phase.end_s)]
    per_stack = st.groupby("stack")["dur_ns"].sum() / 1e9
    totals: dict[str, float] = {}
    for stack, secs in per_stack.items():
        frames = str(stack).split(";")
        for i in range(1, len(frames) + 1):
            path = ";".join(frames[:i])
            totals[path] = totals.get(path, 0.0) + float(secs)
    keep = sorted(totals, key=totals.get, reverse=True)[:max_nodes]
    kept = set(keep)
    rows = []
    for path in keep:
        parent = path.rsplit(";", 1)[0] if ";" in path else ""
        if parent and parent not in kept:
            continue
        rows.append({"id": path, "parent": parent, "label": path.rsplit(";", 1)[-1], "value_s": totals[path]})
    return pd.DataFrame(rows, columns=cols)


def _gpu_activity(run: Run) -> pd.DataFrame:
    k = run.table("kernels")
    return k if k.empty else k.assign(dur_ms=k["dur_ns"] / 1e6)


def kernel_summary(run: Run, n: int = 30) -> pd.DataFrame:
    """Top kernels by total time in the kernel windows."""
    cols = ["name", "category", "count", "total_ms", "mean_us", "share"]
    k = _gpu_activity(run)
    if k.empty:
        return pd.DataFrame(columns=cols)
    k = k[k["kind"] == "kernel"]
    agg = k.groupby(["name", "category"], as_index=False).agg(count=("dur_ms", "size"), total_ms=("dur_ms", "sum"))
    agg["mean_us"] = agg["total_ms"] * 1000 / agg["count"]
    agg["share"] = agg["total_ms"] / agg["total_ms"].sum()
    return agg.sort_values("total_ms", ascending=False).head(n).reset_index(drop=True)[cols]


def kernel_categories(run: Run) -> pd.DataFrame:
    """GPU time per kernel category (gemm, attention, elementwise, memcpy...)."""
    cols = ["category", "count", "total_ms", "share"]
    k = _gpu_activity(run)
    if k.empty:
        return pd.DataFrame(columns=cols)
    agg = k.groupby("category", as_index=False).agg(count=("dur_ms", "size"), total_ms=("dur_ms", "sum"))
    agg["share"] = agg["total_ms"] / agg["total_ms"].sum()
    return agg.sort_values("total_ms", ascending=False).reset_index(drop=True)[cols]


def memcpy_kinds(run: Run) -> pd.DataFrame:
    """Copies by kind (HtoD/DtoH/DtoD) and source memory (pageable/pinned)."""
    cols = ["copy_kind", "src_mem", "count", "bytes", "total_ms", "gb_per_s"]
    k = _gpu_activity(run)
    if k.empty:
        return pd.DataFrame(columns=cols)
    k = k[k["kind"] == "memcpy"]
    if k.empty:
        return pd.DataFrame(columns=cols)
    agg = k.groupby(["copy_kind", "src_mem"], as_index=False).agg(
        count=("dur_ms", "size"), bytes=("bytes", "sum"), total_ms=("dur_ms", "sum"))
    agg["gb_per_s"] = agg["bytes"] / (agg["total_ms"] / 1e3) / 1e9
    return agg.sort_values("total_ms", ascending=False).reset_index(drop=True)[cols]


# The steady-state metrics a summary shows first, in this order (those the run has).
KEY_METRICS: tuple[str, ...] = (
    "steady.duration_s", "steady.steps_per_s", "steady.step_p50_ms", "steady.step_p99_ms",
    "steady.requests_per_s", "steady.request_p99_ms", "steady.queue_wait_p50_ms", "steady.gpu_busy",
    "steady.tensor_active", "steady.dram_bw_util", "steady.inside_model_share", "steady.outside_busy_share",
    "steady.copy_share", "steady.kernel_mean_us", "steady.step_thread_cpu",
)


def key_metrics(metrics: dict[str, float | None]) -> list[tuple[str, float]]:
    """(name, value) of KEY_METRICS that the run has, in order."""
    return [(k, float(metrics[k])) for k in KEY_METRICS if metrics.get(k) is not None]


# Steady-state parts of the time breakdown, from the metrics analysis computes.
# The first are shares of the stepping thread's wall time; GPU idle is the
# device's own (1 - busy), shown beside them.
BREAKDOWN: tuple[tuple[str, str], ...] = (
    ("inside model", "steady.inside_model_share"),
    ("outside model, working", "steady.outside_busy_share"),
    ("outside model, waiting", "steady.outside_wait_share"),
    ("host-device copies", "steady.copy_share"),
    ("synchronizations", "steady.sync_share"),
    ("GC pauses", "steady.gc_share"),
)


def time_breakdown(metrics: dict[str, float | None]) -> pd.DataFrame:
    """The steady state's time shares (part, share) that the metrics hold."""
    rows = [{"part": part, "share": float(metrics[key])} for part, key in BREAKDOWN
            if metrics.get(key) is not None]
    busy = metrics.get("steady.gpu_busy")
    if busy is not None and metrics.get("run.gpu"):
        rows.append({"part": "GPU idle", "share": max(0.0, 1.0 - float(busy))})
    return pd.DataFrame(rows, columns=["part", "share"])


def stage_summary(run: Run) -> pd.DataFrame:
    """NVTX / diag.stage ranges other than requests: count, total and percentiles, in ms."""
    cols = ["name", "count", "total_ms", "p50_ms", "p99_ms", "max_ms"]
    r = run.table("ranges")
    if r.empty:
        return pd.DataFrame(columns=cols)
    r = r[r["kind"] != "request"]
    if r.empty:
        return pd.DataFrame(columns=cols)
    ms = r.assign(ms=r["dur_ns"] / 1e6).groupby("name")["ms"]
    out = pd.DataFrame({"count": ms.size(), "total_ms": ms.sum(), "p50_ms": ms.median(),
                        "p99_ms": ms.quantile(0.99), "max_ms": ms.max()}).reset_index()
    return out.sort_values("total_ms", ascending=False).reset_index(drop=True)[cols]
