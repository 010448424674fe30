"""Communication on the GPU: collectives and peer copies (NCCL, RCCL, HCCL, gloo, symmetric memory).

Shared by imported traces (issue 13) and live multi-GPU runs (issue 17): both
give the same kernel rows (diag/store/kineto.py classifies them `communication`),
so one computation serves both. Metric names are a contract with the live
multi-rank side: keep them stable.

Exposed communication is communication kernel time during which no compute
kernel (any other category, on any stream) runs. Overlapped communication is
hidden behind compute and costs no throughput.

A collective kernel starts when its own rank reaches it and ends once every peer
has arrived and the bytes have moved: its duration is waiting for peers plus the
transfer. The transfer of one collective (same kernel, same message size) takes
about the same time every time, so the fastest instance in the run (over all
ranks recorded) bounds it: each kernel's last `floor` ns are transfer, the time
before is waiting for a peer that is still computing (load imbalance or skew).
Exposed waiting points at what the slowest rank does, not at the links.
Message sizes come from the kernel's args (Kineto `In msg nelems` and `dtype`)
or from diag's collective hooks; without them the kernel's launch shape
(grid, block) stands for the size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.columns import complete
from diag.analysis.context import Context
from diag.analysis.links import nvlink_bps
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
    Metric("steady.comm_wait_fraction", "ratio",
           "Fraction of communication kernel time spent waiting for peers: each collective's time beyond the fastest "
           "instance of the same collective (same kernel and message size) in the run."),
    Metric("steady.comm_exposed_transfer_share", "ratio",
           "Share of the GPU timeline with a collective moving bytes (not waiting for a peer) and no compute kernel "
           "running. Collectives of unknown size count whole."),
    Metric("steady.comm_exposed_transfer_step_p50", "ratio",
           "Median over steps of each step's exposed transfer share (over the step's GPU span): robust to a "
           "window's first steps, where ranks wait for the one that opened the window late."),
    Metric("steady.comm_exposed_wait_share", "ratio",
           "Share of the GPU timeline with collectives waiting for a peer and no compute kernel running: load "
           "imbalance or skew between ranks, set by what the slowest rank does."),
    Metric("steady.comm_sized_fraction", "ratio",
           "Fraction of communication kernel time whose message size is known (kernel args or collective hooks)."),
    Metric("steady.comm_bw", "bytes/s",
           "Achieved bandwidth of the largest collective's transfer: message bytes / its fastest kernel time "
           "(NCCL's algorithm bandwidth; compare with run.link_bw)."),
    Metric("run.link_bw", "bytes/s",
           "Peer link bandwidth per direction from the recorded topology (NVLink links x 25 GB/s, 50 on Blackwell), where known."),
]


@dataclass
class CommStats:
    """Communication in one set of kernel rows over one timeline (ns)."""

    kernel_ns: float  # all kernel time
    comm_ns: float  # communication kernel time
    exposed_ns: float  # communication time with no compute kernel running
    timeline_ns: float  # the timeline the shares are of
    comm_kernels: int
    wait_ns: float = 0.0  # communication kernel time waiting for peers (before each kernel's transfer)
    exposed_transfer_ns: float = 0.0  # transfer time with no compute kernel running

    def __add__(self, o: CommStats) -> CommStats:
        return CommStats(*(getattr(self, f) + getattr(o, f) for f in self.__dataclass_fields__))


def comm_stats(kernels: pd.DataFrame, a: int, b: int) -> CommStats:
    """Communication figures of the `kind == kernel` rows within [a, b].

    A `floor_ns` column (transfer_floor) splits each communication kernel into its
    wait for peers and its transfer; without it the whole kernel is transfer.
    """
    k = kernels[kernels["kind"].astype(str).to_numpy() == "kernel"] if not kernels.empty else kernels
    if k.empty or b <= a:
        return CommStats(0.0, 0.0, 0.0, float(max(0, b - a)), 0)
    ts = k["ts_ns"].to_numpy(dtype=np.int64)
    te = ts + k["dur_ns"].to_numpy(dtype=np.int64)
    is_comm = k["category"].astype(str).to_numpy() == COMM
    dur = (np.minimum(te, b) - np.maximum(ts, a)).clip(0).astype(float)
    cs, ce = intervals.merge(np.clip(ts[is_comm], a, b), np.clip(te[is_comm], a, b))
    floor = k["floor_ns"].to_numpy(dtype=np.int64)[is_comm] if "floor_ns" in k.columns else te[is_comm] - ts[is_comm]
    # the transfer is each kernel's last floor ns: the peers arrived, then the bytes moved
    tstart = np.maximum(ts[is_comm], te[is_comm] - floor)
    ms, me = intervals.merge(np.clip(tstart, a, b), np.clip(te[is_comm], a, b))
    exposed = transfer = 0
    if len(cs):
        exposed = int(np.sum(ce - cs) - np.sum(intervals.covered(ts[~is_comm], te[~is_comm], cs, ce)))
    if len(ms):
        transfer = int(np.sum(me - ms) - np.sum(intervals.covered(ts[~is_comm], te[~is_comm], ms, me)))
    wait = (np.minimum(tstart, b) - np.maximum(ts[is_comm], a)).clip(0).astype(float).sum()
    return CommStats(float(dur.sum()), float(dur[is_comm].sum()), float(max(0, exposed)), float(b - a),
                     int(is_comm.sum()), float(wait), float(max(0, min(transfer, exposed))))


def message_sizes(k: pd.DataFrame) -> np.ndarray:
    """Each row's message bytes as floats (NaN where unknown)."""
    if "bytes" not in k.columns:
        return np.full(len(k), np.nan)
    b = pd.to_numeric(k["bytes"], errors="coerce").to_numpy(dtype=float)
    return np.where(b > 0, b, np.nan)


def transfer_floor(k: pd.DataFrame) -> np.ndarray:
    """Per row: an upper bound of the time its transfer takes once all peers are there.

    Two bounds, the tighter wins: the shortest duration of the same collective (same kernel
    name and message size) in `k`, over every rank recorded; and, in a run holding several
    ranks' kernel windows, the same instance on the other ranks (peer_floor). A collective
    with neither is taken whole as transfer: the same kernel moving a larger message would
    look like waiting. Other rows get their own duration."""
    dur = k["dur_ns"].to_numpy(dtype=np.int64)
    size = message_sizes(k)
    sized = ((k["category"].astype(str) == COMM) & (k["kind"].astype(str) == "kernel")).to_numpy() & ~np.isnan(size)
    out = dur.copy()
    if sized.any():
        key = pd.Series(k["name"].astype(str).to_numpy()[sized]) + "|" + pd.Series(size[sized]).astype(str)
        out[sized] = pd.Series(dur[sized]).groupby(key.to_numpy()).transform("min").to_numpy(dtype=np.int64)
    return np.minimum(out, peer_floor(k))


def peer_floor(k: pd.DataFrame) -> np.ndarray:
    """Per row: the shortest duration of the same collective instance over the ranks recorded.

    Every rank runs the same collectives in the same order, and kernel windows open on the
    same step number on every rank, so the i-th communication kernel of window w is one
    collective on all of them: its transfer ends together everywhere, and the rank that
    arrived last waited least. Used only where each rank's window holds the same kernels in
    the same order; elsewhere (and for other rows) each row's own duration."""
    dur = k["dur_ns"].to_numpy(dtype=np.int64)
    out = dur.copy()
    if "pid" not in k.columns or "window" not in k.columns or k["pid"].nunique() < 2:
        return out
    is_comm = ((k["category"].astype(str) == COMM) & (k["kind"].astype(str) == "kernel")).to_numpy()
    c = k[is_comm].reset_index().sort_values("ts_ns", kind="stable")  # "index": the row's place in k
    pos = pd.Series(np.arange(len(k)), index=k.index)
    for _, w in c.groupby("window"):
        ranks = [g for _, g in w.groupby("pid")]
        names = [g["name"].astype(str).tolist() for g in ranks]
        if len(ranks) < 2 or any(n != names[0] for n in names[1:]):
            continue
        fastest = np.min(np.stack([g["dur_ns"].to_numpy(dtype=np.int64) for g in ranks]), axis=0)
        for g in ranks:
            out[pos[g["index"]].to_numpy()] = fastest
    return out


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
    return [(a, b) for _, a, b in rank_timelines(ctx)]


def rank_timelines(ctx: Context) -> list[tuple[int | None, int, int]]:
    """(pid, start, end) of each process's kernel windows in the steady state (gpu_timeline, one
    span per window and process: each rank's GPU has its own timeline; pid None without a pid column)."""
    k = complete(ctx.run, "kernels")
    windows = complete(ctx.run, "windows")
    if k.empty:
        return []
    by_pid = "pid" in k.columns and k["pid"].notna().all()
    spans: list[tuple[int | None, int, int]] = []
    for key, g in k.groupby(["pid", "window"] if by_pid else ["window"]):
        pid, w = (int(key[0]), key[1]) if by_pid else (None, key[0])
        first = int(g["ts_ns"].min())
        last = int((g["ts_ns"] + g["dur_ns"]).max())
        row = windows[windows["window"] == w] if not windows.empty else windows
        if by_pid and not row.empty and "pid" in row.columns:
            row = row[row["pid"] == pid]
        a, b = first, last
        if not row.empty:
            a = int(row["ts_ns"].iloc[0])
            b = a + int(row["dur_ns"].iloc[0])
            if last > b:
                a, b = first, last
        a, b = max(a, min(ctx.t0, first)), min(b, max(ctx.t1, last))
        if b > a:
            spans.append((pid, a, b))
    return spans


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"run.{k}": float(v) for k, v in distributed(ctx.run).items()}
    link = nvlink_bps(ctx.run.manifest)
    if link is not None:
        out["run.link_bw"] = link
    k = complete(ctx.run, "kernels")
    if k.empty:
        return out
    k = with_message_bytes(ctx, k)
    k = k.assign(floor_ns=transfer_floor(k))
    total = CommStats(0.0, 0.0, 0.0, 0.0, 0)
    for pid, a, b in rank_timelines(ctx):
        mine = k if pid is None else k[(k["pid"] == pid).to_numpy()]
        total = total + comm_stats(mine[(mine["ts_ns"] < b).to_numpy() & ((mine["ts_ns"] + mine["dur_ns"]) > a).to_numpy()], a, b)
    if total.kernel_ns <= 0 or total.timeline_ns <= 0:
        return out
    out["steady.comm_kernel_share"] = total.comm_ns / total.kernel_ns
    out["steady.comm_exposed_share"] = min(1.0, total.exposed_ns / total.timeline_ns)
    if total.comm_ns > 0:
        out["steady.comm_overlap_fraction"] = max(0.0, 1.0 - total.exposed_ns / total.comm_ns)
        out["steady.comm_exposed_transfer_share"] = min(1.0, total.exposed_transfer_ns / total.timeline_ns)
        out.update(_bandwidth(k))
        if out.get("steady.comm_sized_fraction") or total.wait_ns > 0:  # sizes or peers tell waiting apart
            out["steady.comm_wait_fraction"] = min(1.0, total.wait_ns / total.comm_ns)
            out["steady.comm_exposed_wait_share"] = max(0.0, min(1.0, (total.exposed_ns - total.exposed_transfer_ns)
                                                                 / total.timeline_ns))
    per_step = _per_step(ctx, k)
    if per_step is not None:
        n, shares, transfer = per_step
        out["steady.comm_ms_per_step"] = total.comm_ns / 1e6 / n
        out["steady.comm_kernels_per_step"] = total.comm_kernels / n
        if shares:
            out["steady.comm_exposed_step_p50"] = float(np.median(shares))
            if total.comm_ns > 0:
                out["steady.comm_exposed_transfer_step_p50"] = float(np.median(transfer))
    return out


def _bandwidth(k: pd.DataFrame) -> dict[str, float]:
    """Sized fraction of communication time; achieved bandwidth of the largest messages' transfers."""
    c = k[(k["category"].astype(str) == COMM).to_numpy() & (k["kind"].astype(str) == "kernel").to_numpy()]
    dur = c["dur_ns"].to_numpy(dtype=float)
    if c.empty or dur.sum() <= 0:
        return {}
    size = message_sizes(c)
    sized = ~np.isnan(size)
    out = {"steady.comm_sized_fraction": float(dur[sized].sum() / dur.sum())}
    if sized.any():
        big = size == np.nanmax(size)
        floor = float(c["floor_ns"].to_numpy(dtype=float)[big].min())
        if floor > 0:
            out["steady.comm_bw"] = float(np.nanmax(size)) / floor * 1e9
    return out


def _profiled_steps(ctx: Context) -> pd.DataFrame:
    """The steps whose kernels were recorded: the stepping thread's in the steady state, else (kernel
    windows all in the warm-up, as a multi-rank job's first windows are) every process's profiled steps."""
    cols = ["ts_ns", "dur_ns", "in_window", "pid"]
    steps = ctx.steps(main_only=True, cols=cols)
    if not steps.empty and "in_window" in steps.columns:
        steps = steps[steps["in_window"].astype(bool).to_numpy()]
    if steps.empty:
        steps = complete(ctx.run, "steps")
        steps = steps[[c for c in cols if c in steps.columns]]  # filter only the columns used, not the texts
        if steps.empty or "in_window" not in steps.columns:
            return steps
        steps = steps[steps["in_window"].astype(bool).to_numpy()]
    return steps


def _per_step(ctx: Context, k: pd.DataFrame) -> tuple[int, list[float], list[float]] | None:
    """(steps whose kernels were recorded, each such step's exposed communication share and exposed
    transfer share), each step over its own GPU span, on its own process's kernels."""
    profiled = _profiled_steps(ctx)
    if profiled.empty:
        return None
    shares: list[float] = []
    transfer: list[float] = []
    groups = profiled.groupby("pid") if "pid" in profiled.columns and "pid" in k.columns else [(None, profiled)]
    for pid, steps in groups:
        mine = k if pid is None else k[(k["pid"] == pid).to_numpy()]
        steps = steps.sort_values("ts_ns")
        # a step's GPU work may run after the host left it: the step's GPU span runs to the next step's start
        starts = steps["ts_ns"].to_numpy(dtype=np.int64)
        ends = np.append(starts[1:], starts[-1] + steps["dur_ns"].to_numpy(dtype=np.int64)[-1])
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            g = mine[(mine["ts_ns"] >= a).to_numpy() & (mine["ts_ns"] < b).to_numpy()]
            if g.empty:
                continue
            s = comm_stats(g, int(g["ts_ns"].min()), int((g["ts_ns"] + g["dur_ns"]).max()))
            if s.timeline_ns > 0:
                shares.append(s.exposed_ns / s.timeline_ns)
                transfer.append(s.exposed_transfer_ns / s.timeline_ns)
    return len(profiled), shares, transfer


# collective names of kernels (NCCL/RCCL) and of torch.distributed calls, reduced to one spelling
_KERNEL_OPS = ("allreduce", "allgather", "reducescatter", "broadcast", "sendrecv", "alltoall")


def _kernel_op(name: str) -> str | None:
    low = name.lower().replace("_", "")
    for op in _KERNEL_OPS:
        if op in low:
            return op
    return "sendrecv" if ("send" in low or "recv" in low) else None


def _call_op(name: str) -> str:
    low = name.lower().replace("_into_tensor", "").replace("_tensor", "").replace("_single", "").replace("_", "")
    return "sendrecv" if low in ("send", "recv", "isend", "irecv") else low


def with_message_bytes(ctx: Context, k: pd.DataFrame) -> pd.DataFrame:
    """`k` with each unsized communication kernel given the bytes of the torch.distributed call that
    launched it (diag's collective hooks), where a kernel window's calls and kernels of one
    collective pair up one to one, in order; else the kernel stays unsized."""
    if "pid" not in k.columns or "bytes" not in k.columns:
        return k
    events = ctx.run.table("events")
    windows = complete(ctx.run, "windows")
    if events.empty or windows.empty or not {"pid", "detail"} <= set(events.columns) or "pid" not in windows.columns:
        return k
    calls = events[(events["kind"].astype(str) == "comm").to_numpy()]
    if calls.empty:
        return k
    calls = calls.sort_values("ts_ns")
    is_comm = (k["category"].astype(str) == COMM).to_numpy() & np.isnan(message_sizes(k))
    sizes = pd.Series(message_sizes(k), index=k.index)
    for _, w in windows.iterrows():
        a, b = int(w["ts_ns"]), int(w["ts_ns"]) + int(w["dur_ns"])
        wc = calls[(calls["pid"] == w["pid"]).to_numpy() & (calls["ts_ns"] >= a).to_numpy() & (calls["ts_ns"] < b).to_numpy()]
        wk = k[is_comm & (k["pid"] == w["pid"]).to_numpy() & (k["window"] == w["window"]).to_numpy()].sort_values("ts_ns")
        if wc.empty or wk.empty:
            continue
        call_ops = wc["name"].astype(str).map(_call_op)
        kernel_ops = wk["name"].astype(str).map(_kernel_op)
        for op in set(kernel_ops.dropna()):
            these = wc[(call_ops == op).to_numpy()]
            kernels = wk.index[(kernel_ops == op).to_numpy()]
            if len(these) != len(kernels) or ("weight" in these.columns and (these["weight"].fillna(1) != 1).any()):
                continue  # sampled calls or kernels launched by other paths: no one-to-one pairing
            sizes.loc[kernels] = [_detail_bytes(d) for d in these["detail"]]
    return k.assign(bytes=sizes)


def _detail_bytes(detail: object) -> float | None:
    try:
        v = json.loads(str(detail)).get("bytes")
    except (ValueError, AttributeError):
        return None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None
