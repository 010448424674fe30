"""Ranks of a multi-GPU job (torchrun / torch.distributed): one process per rank, each recorded on its own.

A rank is a process whose meta rows carry `rank` (from the environment torchrun
sets; `dist_rank` once init_process_group returned, hooks/distributed.py).
`rank_processes` lists them for the per-member structure (members.py: the
same member view and judge serve server workers, ranks and imported rank
traces). `rank_table` gives each rank's figures; `rank_spread` the job's:
the slowest rank and the imbalance between ranks. Communication time comes
from the `comm` events (collectives timed on the calling thread); the
communication-kernel metrics of issue 13 add the GPU side where kernel
windows ran. Pure functions over the run's tables; no printing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from diag.analysis.members import Member, judge_members
from diag.store.run import Run

# Metrics each rank keeps in its member summary (the GPU side of communication where kernels were seen).
RANK_METRICS = ("steady.steps", "steady.duration_s", "steady.gpu_busy", "steady.comm_kernel_share",
                "steady.comm_exposed_share", "steady.comm_ms_per_step", "run.rank", "run.world_size")

RANK_COLUMNS = ["rank", "local_rank", "pid", "steps", "steps_per_s", "step_p50_ms", "comm_calls", "comm_s",
                "comm_share", "comm_bytes"]


def rank_processes(run: Run) -> list[tuple[int, int, int]]:
    """(pid, rank, local_rank) of every rank of a job of more than one rank, by rank; [] otherwise."""
    meta = run.table("meta")
    if meta.empty or "rank" not in meta.columns:
        return []
    cols = [c for c in ("rank", "dist_rank", "local_rank") if c in meta.columns]
    merged = meta.groupby("pid")[cols].first()  # a process's rows merged: the first value of each key
    out: dict[int, tuple[int, int]] = {}
    for pid, m in merged.iterrows():
        rank = m.get("dist_rank") if pd.notna(m.get("dist_rank")) else m.get("rank")
        if pd.isna(rank):
            continue
        local = m.get("local_rank")
        out[int(pid)] = (int(rank), int(local) if pd.notna(local) else -1)
    if len(out) < 2:
        return []
    return sorted(((pid, r, lr) for pid, (r, lr) in out.items()), key=lambda x: (x[1], x[0]))


def rank_table(run: Run) -> pd.DataFrame:
    """One row per rank (RANK_COLUMNS): steps, steps/s over the rank's stepping span, median step time,
    collectives (calls, seconds on the calling thread, their share of the stepping span, bytes)."""
    ranks = rank_processes(run)
    if not ranks:
        return pd.DataFrame(columns=RANK_COLUMNS)
    steps = run.table("steps")
    events = run.table("events")
    comm = events[events["kind"] == "comm"] if not events.empty else events
    rows: list[dict[str, Any]] = []
    for pid, rank, local in ranks:
        st = steps[steps["pid"] == pid] if not steps.empty else steps
        c = comm[comm["pid"] == pid] if not comm.empty else comm
        rows.append({"rank": rank, "local_rank": local, "pid": pid, **step_figures(st, c)})
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def step_figures(steps: pd.DataFrame, comm: pd.DataFrame) -> dict[str, Any]:
    """One process's steps, steps/s over its stepping span, median step time, and its collectives
    (calls, seconds on the calling thread, their share of the stepping span, bytes)."""
    n = float(steps["weight"].sum()) if not steps.empty else 0.0
    span_s = ((steps["ts_ns"] + steps["dur_ns"]).max() - steps["ts_ns"].min()) / 1e9 if len(steps) > 1 else 0.0
    comm_s = float((comm["dur_ns"] * comm["weight"]).sum()) / 1e9 if not comm.empty else 0.0
    return {"steps": n, "steps_per_s": n / span_s if span_s > 0 else None,
            "step_p50_ms": float(steps["dur_ns"].median()) / 1e6 if not steps.empty else None,
            "comm_calls": float(comm["weight"].sum()) if not comm.empty else 0.0,
            "comm_s": comm_s, "comm_share": comm_s / span_s if span_s > 0 and not comm.empty else None,
            "comm_bytes": _comm_bytes(comm)}


def rank_member(m: Member, row: dict[str, Any]) -> Member:
    """`m` (judged on its own) with its rank's figures (a rank_table row). Where no collective was timed on
    the calling thread (an imported trace), the collective share is the GPU's exposed communication share."""
    m.role, m.index = "rank", int(row["rank"])
    m.rank = int(row["rank"])
    m.local_rank = int(row["local_rank"]) if row.get("local_rank") is not None and row["local_rank"] >= 0 else None
    m.steps, m.steps_per_s, m.step_p50_ms = row.get("steps"), row.get("steps_per_s"), row.get("step_p50_ms")
    share = row.get("comm_share")
    m.comm_share = share if share is not None and share == share else m.metrics.get("steady.comm_exposed_share")
    return m


def judge_ranks(run: Run, judge: object) -> tuple[list[Member], dict[str, Any]]:
    """Every rank of a recorded multi-rank job judged on its own rows (`judge(run) -> Diagnosis`), with its
    figures, and the job's spread (rank_spread). ([], {}) for a run of fewer than two ranks."""
    found = rank_processes(run)
    if not found:
        return [], {}
    table = rank_table(run)
    members = judge_members(run, judge, found=[(pid, "rank", rank) for pid, rank, _ in found], keep=RANK_METRICS)
    rows = {int(r["pid"]): r for r in table.to_dict("records")}
    members = [rank_member(m, rows[m.pid]) for m in members]
    return members, spread_of(members)


def spread_of(members: list[Member]) -> dict[str, Any]:
    """rank_spread over members' own figures (the collective share as each member holds it)."""
    table = pd.DataFrame([{"rank": m.rank, "steps_per_s": m.steps_per_s, "step_p50_ms": m.step_p50_ms,
                           "comm_share": m.comm_share} for m in members],
                         columns=["rank", "steps_per_s", "step_p50_ms", "comm_share"])
    return rank_spread(table.astype({"steps_per_s": float, "step_p50_ms": float, "comm_share": float}))


def _comm_bytes(comm: pd.DataFrame) -> float:
    """Bytes passed to collectives (detail.bytes, weighted by each sampled row's weight)."""
    import json

    total = 0.0
    for detail, w in zip(comm.get("detail", []), comm.get("weight", []), strict=False):
        try:
            total += float(json.loads(detail).get("bytes", 0)) * float(w)
        except (ValueError, TypeError, AttributeError):
            pass
    return total


def rank_spread(table: pd.DataFrame) -> dict[str, Any]:
    """The job's view of its ranks: world size, the slowest rank (fewest steps/s), imbalance of steps/s and of
    median step time (max/min - 1), the largest collective share and its rank. {} for fewer than 2 ranks."""
    if len(table) < 2:
        return {}
    out: dict[str, Any] = {"ranks": len(table)}
    rate = table.dropna(subset=["steps_per_s"])
    if len(rate) >= 2 and rate["steps_per_s"].min() > 0:
        slow = rate.loc[rate["steps_per_s"].idxmin()]
        out["slowest_rank"] = int(slow["rank"])
        out["steps_per_s_imbalance"] = float(rate["steps_per_s"].max() / rate["steps_per_s"].min() - 1)
    p50 = table.dropna(subset=["step_p50_ms"])
    if len(p50) >= 2 and p50["step_p50_ms"].min() > 0:
        out["step_time_imbalance"] = float(p50["step_p50_ms"].max() / p50["step_p50_ms"].min() - 1)
    share = table.dropna(subset=["comm_share"])
    if not share.empty:
        top = share.loc[share["comm_share"].idxmax()]
        out["comm_share_max"] = float(top["comm_share"])
        out["comm_share_max_rank"] = int(top["rank"])
    return out


def trace_rank_members(ranked: list[tuple[int, Run, Any]]) -> tuple[list[Member], dict[str, Any]]:
    """Members of a job read from per-rank traces: (rank, that rank's Run, its Diagnosis) each, judged on
    its own beforehand; and the job's spread. Each trace is its own run (its own clock and pids)."""
    members = []
    for rank, run, d in ranked:
        steps = run.table("steps")
        pids = steps["pid"].dropna() if not steps.empty else pd.Series(dtype=float)
        m = Member(pid=int(pids.iloc[0]) if not pids.empty else -1, role="rank", index=rank, requests=0.0,
                   request_share=None, metrics={k: d.metrics.get(k) for k in RANK_METRICS}, primary=d.primary,
                   score=float(d.scores.get(d.primary, 0.0)) if d.primary else 0.0, margin=d.margin)
        empty = pd.DataFrame(columns=["dur_ns", "weight", "detail"])
        members.append(rank_member(m, {"rank": rank, "local_rank": -1, **step_figures(steps, empty)}))
    return members, spread_of(members) if len(members) >= 2 else {}
