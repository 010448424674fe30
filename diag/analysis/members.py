"""Members of a program made of several processes that do the same job: server workers today,
ranks of a multi-GPU job (issue 17) and the ranks of imported per-rank traces (issue 13) next.

A member is one process with a role and an index (gunicorn worker_index,
uvicorn's spawn order, later the rank). Each member is judged on its own by
running the same analysis over a view of the run that holds only that
process's rows (`member_run`): the same metrics, rules and verdict, no
second code path. The whole (the server, the job) keeps its own verdict from
the full run; `spread` says how the work is shared between members.

A peer member is never an input worker: analysis marks server processes
(`server` events) so DataLoader rules leave them alone (steady.serving).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from diag.analysis.ranges import run_requests
from diag.analysis.serving import ids, server_roles
from diag.store.run import Run

# Metrics each member keeps in its summary (the rest stay in its own Diagnosis when asked for).
MEMBER_METRICS = (
    "steady.requests", "steady.requests_per_s", "steady.request_p50_ms", "steady.request_p99_ms",
    "steady.pre_handler_wait_share", "steady.loop_lag_p99_ms", "steady.loop_blocked_share", "steady.loop_held_share",
    "steady.loop_thread_cpu", "steady.model_busy_share", "steady.process_cpu_cores", "steady.batch_p50",
)


@dataclass
class Member:
    """One process of the group: its role, index and share of the work, and its own metrics."""

    pid: int
    role: str  # worker | single | rank
    index: int  # worker index or rank (-1 unknown)
    requests: float
    request_share: float | None  # of all requests served by the members
    metrics: dict[str, float | None] = field(default_factory=dict)
    primary: str | None = None  # its own verdict
    score: float = 0.0
    margin: float | None = None  # its primary's lead over its runner-up (diag.engine.verdict)
    # a rank of a multi-GPU job (ranks.py): its rank, local rank and figures; None for server workers
    rank: int | None = None
    local_rank: int | None = None
    steps: float | None = None
    steps_per_s: float | None = None
    step_p50_ms: float | None = None
    comm_share: float | None = None  # of its stepping span in collectives (calling thread, or kernels)


@dataclass
class MemberRun(Run):
    """A view of a run holding only one process's rows (tables without a pid column stay whole)."""

    whole: Run | None = None
    pid: int = -1

    def table(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            assert self.whole is not None
            df = self.whole.table(name)
            self._cache[name] = (df[df["pid"].to_numpy() == self.pid].reset_index(drop=True)
                                 if "pid" in df.columns else df)
        return self._cache[name]


def member_run(run: Run, pid: int) -> Run:
    """A view of `run` holding only process `pid`'s rows (tables without a pid column stay whole)."""
    return MemberRun(path=run.path, manifest=run.manifest, whole=run, pid=pid)


def server_members(run: Run) -> list[tuple[int, str, int]]:
    """(pid, role, index) of the processes that serve: workers, or a single serving process.

    A master that forks workers and serves nothing is no member. uvicorn workers
    have no index of their own: the master's `worker_pids` order gives it.
    """
    roles = server_roles(run.table("events"))
    order: dict[int, int] = {}
    for d in roles.values():
        for i, p in enumerate(d.get("worker_pids") or []):
            if isinstance(p, int):
                order[p] = i
    req = run_requests(run)
    serving = set(ids(req["pid"])) if not req.empty else set()
    out = []
    for pid, d in sorted(roles.items()):
        role = str(d.get("role") or "")
        if role == "master":
            continue
        idx = d.get("worker_index")
        index = int(idx) if isinstance(idx, int) and idx >= 0 else order.get(pid, -1)
        out.append((pid, role or "worker", index))
    known = {p for p, _, _ in out}
    out += [(p, "worker", -1) for p in sorted(serving - known)]
    return sorted(out, key=lambda m: (m[2] < 0, m[2], m[0]))


def judge_members(run: Run, judge: object, found: list[tuple[int, str, int]] | None = None,
                  keep: tuple[str, ...] = MEMBER_METRICS) -> list[Member]:
    """Every member judged on its own: `judge(run) -> Diagnosis` is called on each member's view.

    `found` lists the members as (pid, role, index): the server's workers when None
    (`server_members`), the ranks of a job otherwise (ranks.rank_members). `keep`
    names the metrics each member keeps. Empty when there are fewer than two members
    (a single process is the whole).
    """
    found = server_members(run) if found is None else found
    if len(found) < 2:
        return []
    req = run_requests(run)
    per = req.groupby("pid")["weight"].sum() if not req.empty else pd.Series(dtype=float)
    total = float(per.sum())
    out = []
    for pid, role, index in found:
        d = judge(member_run(run, pid))  # type: ignore[operator]
        n = float(per.get(pid, 0.0))
        out.append(Member(pid=pid, role=role, index=index, requests=n,
                          request_share=n / total if total > 0 else None,
                          metrics={k: d.metrics.get(k) for k in keep},
                          primary=d.primary, score=float(d.scores.get(d.primary, 0.0)) if d.primary else 0.0,
                          margin=d.margin))
    return out
