"""Communication on the GPU: collectives and peer copies (NCCL, RCCL, HCCL, gloo, symmetric memory).

Shared by imported traces (issue 13) and live multi-GPU runs (issue 17): both
give the same kernel rows (diag/store/kineto.py classifies them `communication`),
so one computation serves both. Metric names are a contract with the live
multi-rank side: keep them stable.

Exposed communication is communication kernel time during which no compute
kernel (any other category, on any stream) runs: the time the step waits on the
wire. Overlapped communication is hidden behind compute and costs no throughput.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.columns import complete
from diag.analysis.context import Context
from diag.store.run import Run

COMM = "communication"

METRICS = [
    Metric("run.rank", "count", "This process's rank in a distributed job (trace distributedInfo or the launcher's env)."),
    Metric("run.world_size", "count", "Number of ranks in the distributed job."),
    Metric("steady.comm_kernel_share", "ratio",
           "Share of GPU kernel time in communication kernels (NCCL/RCCL/HCCL collectives, send/recv, symmetric-memory all-reduce)."),
    Metric("steady.comm_exposed_share", "ratio",
           "Share of the GPU timeline with a communication kernel running and no compute kernel on any stream: communication not hidden behind compute."),
    Metric("steady.comm_overlap_fraction", "ratio",
           "Fraction of communication kernel time overlapped by compute kernels on other streams."),
    Metric("steady.comm_ms_per_step", "ms", "Communication kernel time per step."),
    Metric("steady.comm_exposed_step_p50", "ratio",
           "Median over steps of each step's exposed communication share (steps with GPU work only)."),
    Metric("steady.comm_kernels_per_step", "count", "Communication kernels per step."),
]


@dataclass
class CommStats:
    """Communication in one set of kernel rows over one timeline (ns)."""

    kernel_ns: float  # all kernel time
    comm_ns: float  # communication kernel time
    exposed_ns: float  # communication time with no compute kernel running
    timeline_ns: float  # the timeline the shares are of
    comm_kernels: int


def comm_stats(kernels: pd.DataFrame, a: int, b: int) -> CommStats:
    """Communication figures of the `kind == kernel` rows within [a, b]."""
    k = kernels[kernels["kind"].astype(str).to_numpy() == "kernel"] if not kernels.empty else kernels
    if k.empty or b <= a:
        return CommStats(0.0, 0.0, 0.0, float(max(0, b - a)), 0)
    ts = k["ts_ns"].to_numpy(dtype=np.int64)
    te = ts + k["dur_ns"].to_numpy(dtype=np.int64)
    is_comm = k["category"].astype(str).to_numpy() == COMM
    dur = (np.minimum(te, b) - np.maximum(ts, a)).clip(0).astype(float)
    cs, ce = intervals.merge(np.clip(ts[is_comm], a, b), np.clip(te[is_comm], a, b))
    exposed = 0
    if len(cs):
        under = intervals.covered(ts[~is_comm], te[~is_comm], cs, ce)
        exposed = int(np.sum(ce - cs) - np.sum(under))
    return CommStats(float(dur.sum()), float(dur[is_comm].sum()), float(max(0, exposed)), float(b - a),
                     int(is_comm.sum()))


def distributed(run: Run) -> dict[str, int]:
    """{rank, world_size} from the manifest's `distributed` entry (imported or live), what it has."""
    info = run.manifest.get("distributed")
    out: dict[str, int] = {}
    if isinstance(info, dict):
        for key in ("rank", "world_size"):
            v = info.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                out[key] = v
    return out


def gpu_timeline(ctx: Context) -> list[tuple[int, int]]:
    """The spans of GPU timeline the steady state holds: each kernel window's span within the
    steady state (its activity span where the GPU ran past the host's window)."""
    k = complete(ctx.run, "kernels")
    windows = complete(ctx.run, "windows")
    if k.empty:
        return []
    spans = []
    for w, g in k.groupby("window"):
        first = int(g["ts_ns"].min())
        last = int((g["ts_ns"] + g["dur_ns"]).max())
        row = windows[windows["window"] == w] if not windows.empty else windows
        a, b = first, last
        if not row.empty:
            a = int(row["ts_ns"].iloc[0])
            b = a + int(row["dur_ns"].iloc[0])
            if last > b:
                a, b = first, last
        a, b = max(a, min(ctx.t0, first)), min(b, max(ctx.t1, last))
        if b > a:
            spans.append((a, b))
    return spans


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"run.{k}": float(v) for k, v in distributed(ctx.run).items()}
    k = complete(ctx.run, "kernels")
    if k.empty:
        return out
    total = CommStats(0.0, 0.0, 0.0, 0.0, 0)
    for a, b in gpu_timeline(ctx):
        s = comm_stats(k[(k["ts_ns"] < b).to_numpy() & ((k["ts_ns"] + k["dur_ns"]) > a).to_numpy()], a, b)
        total = CommStats(total.kernel_ns + s.kernel_ns, total.comm_ns + s.comm_ns, total.exposed_ns + s.exposed_ns,
                          total.timeline_ns + s.timeline_ns, total.comm_kernels + s.comm_kernels)
    if total.kernel_ns <= 0 or total.timeline_ns <= 0:
        return out
    out["steady.comm_kernel_share"] = total.comm_ns / total.kernel_ns
    out["steady.comm_exposed_share"] = min(1.0, total.exposed_ns / total.timeline_ns)
    if total.comm_ns > 0:
        out["steady.comm_overlap_fraction"] = max(0.0, 1.0 - total.exposed_ns / total.comm_ns)
    per_step = _per_step(ctx, k)
    if per_step is not None:
        n, shares = per_step
        out["steady.comm_ms_per_step"] = total.comm_ns / 1e6 / n
        out["steady.comm_kernels_per_step"] = total.comm_kernels / n
        if shares:
            out["steady.comm_exposed_step_p50"] = float(np.median(shares))
    return out


def _per_step(ctx: Context, k: pd.DataFrame) -> tuple[int, list[float]] | None:
    """(steps whose kernels were recorded, each such step's exposed communication share)."""
    steps = ctx.steps(main_only=True, cols=["ts_ns", "dur_ns", "in_window"])
    if steps.empty:
        return None
    profiled = steps[steps["in_window"].astype(bool).to_numpy()] if "in_window" in steps.columns else steps
    if profiled.empty:
        return None
    shares = []
    # a step's GPU work may run after the host left it: the step's GPU span runs to the next step's start
    starts = profiled["ts_ns"].to_numpy(dtype=np.int64)
    ends = np.append(starts[1:], starts[-1] + profiled["dur_ns"].to_numpy(dtype=np.int64)[-1])
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        g = k[(k["ts_ns"] >= a).to_numpy() & (k["ts_ns"] < b).to_numpy()]
        if g.empty:
            continue
        first = int(g["ts_ns"].min())
        last = int((g["ts_ns"] + g["dur_ns"]).max())
        s = comm_stats(g, first, last)
        if s.timeline_ns > 0:
            shares.append(s.exposed_ns / s.timeline_ns)
    return len(profiled), shares
