"""What a profiler trace alone says about the host: launch->start delay, GPU waits, input spans.

A Kineto or Nsight trace has no stack samples and no thread CPU, so the host's
part is read from the GPU timeline itself (HTA's "queue length" / kernel launch
delay idea): where the GPU is idle and nothing launched is waiting to run, it
waits for the host; where it is idle with launched work queued, it waits on a
dependency (another stream, a blocking copy, a peer). Kernel rows carry
`launch_ns` (the host's launch call) where the trace links them (correlation ids).

Also the imported trace's verdict basis: `decline_reason` says why a trace
cannot be judged (no GPU events, an accelerator diag does not read, too few
kernels), and a trace with no steps is judged on kernel evidence over its
GPU-active span (`trace.kernel_evidence_only`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.columns import complete
from diag.analysis.communication import gpu_timeline
from diag.analysis.context import Context
from diag.analysis.phases import imported
from diag.store.run import Run

MIN_KERNELS = 10  # fewer kernels than this say nothing about a program
FEW_KERNELS = 30  # ... and fewer than this need at least MIN_KERNEL_MS of GPU work
MIN_KERNEL_MS = 1.0
MIN_LAUNCH_COVERAGE = 0.5  # launch times known for at least this share of GPU events
IDLE_DECLINE = 0.5  # a trace with no steps and a GPU idle more than this is not judged on kernels
QUEUE_DECLINE = 0.4  # the GPU waits with work queued this share of its span, on nothing the trace shows

METRICS = [
    Metric("trace.kernels", "count", "GPU kernels in the imported trace."),
    Metric("trace.kernel_ms", "ms", "GPU kernel time in the imported trace."),
    Metric("trace.kernel_evidence_only", "flag",
           "1 when the trace has no steps: its verdict rests on kernel evidence over the GPU-active span."),
    Metric("steady.launch_delay_p50_us", "us",
           "Median delay from a kernel's launch call on the host to its start on the GPU (how far the host runs ahead)."),
    Metric("steady.gpu_host_wait_share", "ratio",
           "Share of the GPU timeline the GPU is idle with nothing launched waiting to run: it waits for the host."),
    Metric("steady.gpu_queue_wait_share", "ratio",
           "Share of the GPU timeline the GPU is idle although launched work waits: a dependency holds it (another stream, a blocking copy, a peer)."),
    Metric("steady.input_share", "ratio",
           "Share of steady time in DataLoader or preprocessing spans on the host (trace annotations)."),
    Metric("steady.host_before_first_kernel_share", "ratio",
           "Mean share of a step that passes on the host before the step launches its first GPU work."),
]

_GPU_KINDS = ("kernel", "memcpy", "memset")


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    k = complete(ctx.run, "kernels")
    if imported(ctx.run):
        kern = k[k["kind"].astype(str).to_numpy() == "kernel"] if not k.empty else k
        out["trace.kernels"] = float(len(kern))
        out["trace.kernel_ms"] = float(kern["dur_ns"].sum()) / 1e6 if not kern.empty else 0.0
        out["trace.kernel_evidence_only"] = 1.0 if ctx.run.table("steps").empty and not kern.empty else 0.0
        # ProfilerStep#N and engine steps are loop iterations, not model calls: a trace cannot
        # say what share of the host's time is inside the model
        out["steady.inside_model_share"] = None
        out["steady.outside_model_share"] = None
    if k.empty:
        return out
    _queue(ctx, k, out)
    _input(ctx, out)
    _before_first_kernel(ctx, k, out)
    return out


def _queue(ctx: Context, k: pd.DataFrame, out: dict[str, float | None]) -> None:
    if "launch_ns" not in k.columns:
        return
    g = k[k["kind"].astype(str).isin(_GPU_KINDS).to_numpy()]
    launch = pd.to_numeric(g["launch_ns"], errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    known = launch > 0
    if len(g) == 0 or known.mean() < MIN_LAUNCH_COVERAGE:
        return
    ts = g["ts_ns"].to_numpy(dtype=np.int64)
    te = ts + g["dur_ns"].to_numpy(dtype=np.int64)
    is_kernel = g["kind"].astype(str).to_numpy() == "kernel"
    delay = (ts - launch)[known & is_kernel]
    if len(delay):
        out["steady.launch_delay_p50_us"] = float(np.median(np.clip(delay, 0, None))) / 1e3
    # launched but not started: [launch, start) of each event whose launch is known
    qs, qe = intervals.merge(launch[known & (ts > launch)], ts[known & (ts > launch)])
    host = queued = timeline = 0
    for a, b in gpu_timeline(ctx):
        bs, be = intervals.merge(np.clip(ts, a, b), np.clip(te, a, b))
        idle_s = np.append(a, be)
        idle_e = np.append(bs, b)
        keep = idle_e > idle_s
        idle_s, idle_e = idle_s[keep], idle_e[keep]
        idle = int(np.sum(idle_e - idle_s))
        q = int(np.sum(intervals.covered(qs, qe, idle_s, idle_e))) if len(idle_s) and len(qs) else 0
        host += idle - q
        queued += q
        timeline += b - a
    if timeline > 0:
        out["steady.gpu_host_wait_share"] = host / timeline
        out["steady.gpu_queue_wait_share"] = queued / timeline


def _input(ctx: Context, out: dict[str, float | None]) -> None:
    r = ctx.window("ranges", by_end=True)
    if r.empty or ctx.seconds <= 0 or not imported(ctx.run):
        return
    names = r["name"].astype(str).str.lower()
    inp = r[names.str.contains("dataloader|preprocess|collate|tokeniz", regex=True).to_numpy()]
    if inp.empty:
        out["steady.input_share"] = 0.0
        return
    s = np.clip(inp["ts_ns"].to_numpy(dtype=np.int64), ctx.t0, ctx.t1)
    e = np.clip(s + inp["dur_ns"].to_numpy(dtype=np.int64), ctx.t0, ctx.t1)
    ms, me = intervals.merge(s, e)
    out["steady.input_share"] = min(1.0, float(np.sum(me - ms)) / 1e9 / ctx.seconds)


def _before_first_kernel(ctx: Context, k: pd.DataFrame, out: dict[str, float | None]) -> None:
    if "launch_ns" not in k.columns:
        return
    steps = ctx.steps(main_only=True, cols=["ts_ns", "dur_ns"])
    launch = pd.to_numeric(k["launch_ns"], errors="coerce").fillna(-1).to_numpy(dtype=np.int64)
    launch = np.sort(launch[launch > 0])
    if steps.empty or not len(launch):
        return
    shares = []
    starts = steps["ts_ns"].to_numpy(dtype=np.int64).tolist()
    for a, d in zip(starts, steps["dur_ns"].to_numpy(dtype=np.int64).tolist(), strict=True):
        i = int(np.searchsorted(launch, a))
        if d > 0 and i < len(launch) and launch[i] < a + d:
            shares.append((launch[i] - a) / d)
    if shares:
        out["steady.host_before_first_kernel_share"] = float(np.mean(shares))


def decline_reason(run: Run, metrics: dict[str, float | None]) -> str:
    """Why an imported trace cannot be judged, in one line ('' when it can).

    Never advice for live runs: the user holds a file, not a program under diag.
    """
    accel = (run.manifest.get("imported_from") or {}).get("accelerator")
    n = metrics.get("trace.kernels") or 0
    if accel and not n:
        return (f"the trace records {accel} accelerator activity, which diag does not read "
                "(it reads CUDA and ROCm kernels)")
    if not n:
        k = run.table("kernels")
        if not k.empty:
            return "the trace holds GPU copies but no kernels"
        return ("the trace has no GPU events: record it with "
                "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])")
    ms = metrics.get("trace.kernel_ms") or 0.0
    if n < MIN_KERNELS or (n < FEW_KERNELS and ms < MIN_KERNEL_MS):
        return (f"the trace holds {n:.0f} GPU kernels ({ms:.2f} ms of GPU work): too few to judge; "
                "profile several whole steps")
    busy = metrics.get("steady.gpu_busy")
    if busy is not None:  # copies keep the GPU (its copy engines) busy too: a copy-filled trace is judged
        busy += metrics.get("steady.memcpy_exposed_share") or 0.0
    if metrics.get("trace.kernel_evidence_only") and busy is not None and busy < IDLE_DECLINE:
        return (f"the trace has no steps and the GPU is idle {1 - busy:.0%} of its active span: with no step "
                "to frame it, the trace cannot say whether the host, setup or a pause held the GPU; "
                "profile whole steps (torch.profiler schedule with prof.step())")
    queued = metrics.get("steady.gpu_queue_wait_share")
    if queued is not None and queued >= QUEUE_DECLINE and (metrics.get("steady.comm_kernel_share") or 0) < 0.1:
        return (f"the GPU waits {queued:.0%} of its active span with launched work queued, on something "
                "the trace does not show (a blocking copy, another stream or process)")
    return ""
