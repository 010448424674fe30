"""The ranks of a multi-rank job as a short table (console, TUI and report share it): each rank judged on
its own, then the job's figures (slowest rank, imbalance, largest collective share).

Formatting only: every number comes computed from analysis (Diagnosis.members, Diagnosis.ranks).
"""

from __future__ import annotations

from typing import Any

from diag.analysis.units import format_value
from diag.engine.diagnosis import Diagnosis

COLUMNS = ("rank", "pid", "verdict", "margin", "steps/s", "step p50", "collectives")


def rank_members(d: Diagnosis) -> list[dict[str, Any]]:
    """The members that are ranks (a recorded multi-rank run or a directory of rank traces)."""
    return [m for m in d.members if m.get("rank") is not None]


def rank_rows(d: Diagnosis) -> list[dict[str, str]]:
    """One row of printed cells (COLUMNS) per rank."""
    rows = []
    for m in rank_members(d):
        verdict = f"{m['primary']} {format_value(m.get('score'), 'count')}" if m.get("primary") else "no verdict"
        rows.append({"rank": str(m["rank"]), "pid": str(m.get("pid", "")), "verdict": verdict,
                     "margin": format_value(m.get("margin"), "count"),
                     "steps/s": format_value(m.get("steps_per_s"), "per_s"),
                     "step p50": format_value(m.get("step_p50_ms"), "ms"),
                     "collectives": format_value(m.get("comm_share"), "ratio")})
    return rows


def job_line(d: Diagnosis) -> str:
    """The job's figures in one line, '' without ranks."""
    r = d.ranks
    if not r:
        return ""
    parts = [f"{r.get('ranks', len(rank_members(d)))} ranks"]
    if "slowest_rank" in r:
        parts.append(f"slowest rank {r['slowest_rank']} "
                     f"(steps/s imbalance {format_value(r.get('steps_per_s_imbalance'), 'ratio')})")
    if "step_time_imbalance" in r:
        parts.append(f"step time imbalance {format_value(r['step_time_imbalance'], 'ratio')}")
    if "comm_share_max" in r:
        parts.append(f"most in collectives: rank {r.get('comm_share_max_rank')} "
                     f"({format_value(r['comm_share_max'], 'ratio')})")
    if "verdict_from_rank" in r:
        parts.append(f"job verdict from rank {r['verdict_from_rank']}")
    return "job: " + " · ".join(parts)


def lines(d: Diagnosis) -> list[str]:
    """The rank table as aligned text lines, then the job's line; [] without ranks."""
    rows = rank_rows(d)
    if not rows:
        return []
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in COLUMNS}
    out = ["ranks, each judged on its own:",
           "  " + "  ".join(c.ljust(widths[c]) for c in COLUMNS).rstrip()]
    out += ["  " + "  ".join(r[c].ljust(widths[c]) for c in COLUMNS).rstrip() for r in rows]
    job = job_line(d)
    return out + ([job] if job else [])
