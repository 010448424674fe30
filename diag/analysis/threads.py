"""Threads and their roles: per-thread CPU and hot frames, by role (event loop, executors, stepping thread).

Roles come from the recorder's `thread_role` events (docs/run-format.md):
`event_loop`, `loop_executor` (`asyncio.to_thread`), `executor`
(ThreadPoolExecutor), `request_thread` (ran a WSGI handler). A thread that
runs steps is also `stepping`. CPU is from the `threads` table (cumulative
user+system seconds, forward-filled), hot frames from the stack samples.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from diag.analysis.columns import as_bool
from diag.analysis.context import Context, num

ROLES = ("event_loop", "loop_executor", "executor", "request_thread", "stepping")
ROLE_WORDS = {"event_loop": "event-loop thread", "loop_executor": "loop executor thread (asyncio.to_thread)",
              "executor": "executor thread", "request_thread": "request thread", "stepping": "stepping thread"}

# Frames that are the interpreter's or a library's, not the program's: a hot frame names the program's own.
_LIBRARY = re.compile(r"\((?:<frozen [^>]*>|[^;()]*/(?:site-packages|dist-packages|lib/python3\.\d+)/[^;()]*"
                      r"|[^;()]*/diag/(?:collect|api)[^;()]*)(?::\d+)?\)$")
# py-spy's root frames: the process and thread, not code.
_ROOT = re.compile(r'(?:process \d+:|thread \(0x)|.*\(:0\)$')
# The loop waiting for work: its selector (not a blocking call of the program).
_SELECTOR = re.compile(r"\.select \([^;()]*selectors\.py:\d+\)$")  # the innermost frame


@dataclass(frozen=True)
class ThreadInfo:
    """One thread that matters: its role, its CPU over the window and where its samples were."""

    pid: int
    tid: int
    role: str
    name: str
    cpu_cores: float | None  # CPU seconds / window seconds (None: no per-thread CPU recorded)
    samples: int  # stack samples in the window, running (not idle)
    hot_frame: str  # the program's own innermost frame seen most in those samples ("" none)
    hot_share: float | None  # share of the running samples in which that frame was innermost-own


def roles(ctx: Context) -> pd.DataFrame:
    """(pid, tid, role, name) of every thread with a role; a thread may hold several (stepping and executor)."""
    key = "thread_roles"
    if key in ctx._cache:
        return ctx._cache[key]
    rows: list[tuple[int, int, str, str]] = []
    ev = ctx.run.table("events")
    if not ev.empty:
        tr = ev[ev["kind"] == "thread_role"]
        for pid, tid, name, detail in zip(tr["pid"], tr["tid"], tr["name"], tr["detail"], strict=True):
            if pd.isna(pid) or pd.isna(tid):
                continue
            try:
                tname = str((json.loads(detail) or {}).get("thread_name", ""))
            except (TypeError, ValueError, AttributeError):
                tname = ""
            rows.append((int(pid), int(tid), str(name), tname))
    steps = ctx.steps(cols=["pid", "tid"])
    if not steps.empty:
        for (pid, tid), _ in steps.groupby(["pid", "tid"]):
            rows.append((int(pid), int(tid), "stepping", ""))
    df = pd.DataFrame(rows, columns=["pid", "tid", "role", "name"]).drop_duplicates(["pid", "tid", "role"])
    ctx._cache[key] = df
    return df


def thread_cpu(ctx: Context, runq: bool = False) -> dict[tuple[int, int], float]:
    """CPU cores each thread used over the window (cumulative user+system seconds, forward-filled);
    with `runq`, the share of the window it was runnable but waiting for a core (run_delay_s)."""
    key = f"thread_cpu:{runq}"
    if key in ctx._cache:
        return ctx._cache[key]
    out: dict[tuple[int, int], float] = {}
    th = ctx.run.table("threads")
    if not th.empty and ctx.seconds > 0:
        cpu = num(th["run_delay_s"]) if runq else num(th["user_s"]) + num(th["system_s"])
        th = th.assign(_cpu=cpu)[["ts_ns", "pid", "tid", "_cpu"]].dropna()
        for (pid, tid), g in th.groupby(["pid", "tid"]):
            ts, v = g["ts_ns"].to_numpy(dtype=np.int64), g["_cpu"].to_numpy(dtype=float)
            a = _at(ts, v, ctx.t0)
            b = _at(ts, v, ctx.t1)
            out[(int(pid), int(tid))] = max(0.0, b - a) / ctx.seconds
    ctx._cache[key] = out
    return out


def _at(ts: np.ndarray, v: np.ndarray, t: int) -> float:
    """The cumulative value at t: the last row at or before t (0 before the thread was seen)."""
    i = int(np.searchsorted(ts, t, side="right")) - 1
    return float(v[i]) if i >= 0 else 0.0


@functools.lru_cache(maxsize=1 << 16)  # stacks repeat: tens of thousands of samples, a few hundred stacks
def own_frame(stack: str) -> str:
    """The innermost frame of the program's own code (not the interpreter's, torch's or a server's)."""
    frames = [f for f in stack.split(";") if not _ROOT.match(f)]
    for f in reversed(frames):
        if not _LIBRARY.search(f):
            return _short(f)
    return ""  # only library frames (or a stack cut short): names nothing of the program


def _short(frame: str) -> str:
    """`normalise (/work/app/model.py:40)` -> `normalise (model.py:40)`."""
    m = re.match(r"(.*) \((?:.*/)?([^/]*)\)$", frame)
    return f"{m.group(1)} ({m.group(2)})" if m else frame


def threads(ctx: Context) -> list[ThreadInfo]:
    """Every thread with a role, with its CPU and hot frame over the window (one row per thread and role)."""
    key = "thread_infos"
    if key in ctx._cache:
        return ctx._cache[key]
    r = roles(ctx)
    cpu = thread_cpu(ctx)
    st = ctx.window("stacks", by_end=True)
    out: list[ThreadInfo] = []
    for pid, tid, role, name in r.itertuples(index=False):
        frame, share, n = "", None, 0
        if not st.empty:
            mine = st[(st["pid"].to_numpy() == pid) & (st["tid"].to_numpy() == tid)]
            if not mine.empty:
                running = mine[~as_bool(mine["idle"])]
                # count each distinct stack once: samples repeat a few hundred stacks thousands of times
                # factorize: distinct stacks in order of appearance, without iterating the string column
                codes, stacks = pd.factorize(running["stack"].array)
                counts = {s: c for s, c in zip(stacks, np.bincount(codes[codes >= 0], minlength=len(stacks)).tolist(),
                                               strict=True) if isinstance(s, str)}
                working = {s: c for s, c in counts.items() if not _SELECTOR.search(s.rpartition(";")[2])}
                n = sum(working.values())
                own: Counter[str] = Counter()
                for s, c in working.items():
                    f = own_frame(s)
                    if f:
                        own[f] += c
                if own:
                    (frame, k), = own.most_common(1)
                    share = k / n
        out.append(ThreadInfo(int(pid), int(tid), str(role), str(name), cpu.get((int(pid), int(tid))),
                              n, frame, share))
    ctx._cache[key] = out
    return out


def by_role(ctx: Context, role: str) -> list[ThreadInfo]:
    """The threads of one role."""
    return [t for t in threads(ctx) if t.role == role]


def role_table(ctx: Context) -> pd.DataFrame:
    """Per thread with a role: pid, tid, role (in words), thread name, CPU cores, hot frame and its share.

    What the TUI and report show as "Threads"; sorted busiest first.
    """
    infos = threads(ctx)
    other = {(t.pid, t.tid) for t in infos if t.role != "stepping"}
    stepping = {(t.pid, t.tid) for t in infos if t.role == "stepping"}
    rows = [{"pid": t.pid, "tid": t.tid,
             "role": ROLE_WORDS.get(t.role, t.role) + (", runs the model" if (t.pid, t.tid) in stepping else ""),
             "thread": t.name, "cpu_cores": t.cpu_cores, "samples": t.samples, "hot_frame": t.hot_frame,
             "hot_share": t.hot_share}
            for t in infos if t.role != "stepping" or (t.pid, t.tid) not in other]
    df = pd.DataFrame(rows, columns=["pid", "tid", "role", "thread", "cpu_cores", "samples", "hot_frame",
                                     "hot_share"])
    return df.sort_values("cpu_cores", ascending=False, na_position="last").reset_index(drop=True)
