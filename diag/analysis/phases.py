"""Phases of a run: startup, warm-up, steady state.

- startup: process start to the end of the first step (or first request);
- warm-up: the steps after it until latency settles: the first step from which
  the rolling median of step latency stays within `SETTLE_TOLERANCE` of the
  steady median (the median of the second half of the steps), capped at half
  of the steps so a drifting workload still has a steady state, and none where
  the program's work between steps slowed as much as the steps (a slower host,
  not a warm-up: `host_slowed`); and at least
  the leading steps whose input shape never occurs again (pre-warming each
  expected shape with a dummy batch), when the later steps repeat their shapes;
- steady: the rest, up to the end of the last step (or request).

A run with steps is phased on the thread that spends the most time in steps;
a run with requests but no steps on request latency; a run with neither is
one steady phase over the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diag.analysis.columns import as_bool, complete
from diag.analysis.ranges import run_requests
from diag.store.run import Run

SETTLE_TOLERANCE = 0.25  # rolling median within 25% of the steady median
MIN_FOR_WARMUP = 8  # fewer steps than this: no warm-up phase


@dataclass
class Phase:
    """A phase as the Diagnosis and the views show it: seconds since the run started."""

    name: str  # startup, warmup, steady
    start_s: float
    end_s: float


@dataclass
class Span:
    name: str
    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9


@dataclass
class Phases:
    """The phases of one run and what they were derived from."""

    basis: str  # "steps", "requests" or "run"
    startup: Span | None
    warmup: Span | None
    steady: Span
    main_pid: int | None = None  # the stepping thread, when basis == "steps"
    main_tid: int | None = None
    warmup_steps: int = 0

    def spans(self) -> list[Span]:
        return [s for s in (self.startup, self.warmup, self.steady) if s is not None]


def imported(run: Run) -> bool:
    """Whether the run was imported from another tool's trace (no process start, no samplers)."""
    return bool(run.manifest.get("imported_from"))


def main_thread(steps: pd.DataFrame) -> tuple[int, int] | None:
    """The (pid, tid) that spends the most time inside steps."""
    if steps.empty:
        return None
    total = steps.groupby(["pid", "tid"])["dur_ns"].sum()
    pid, tid = total.idxmax()
    return int(pid), int(tid)


def settle_index(dur: np.ndarray) -> int:
    """Index of the first steady sample in a latency sequence (0: no warm-up).

    Latency has settled at the first step from which the median of every 5
    neighbouring steps stays within SETTLE_TOLERANCE of the steady median for
    the next `hold` steps (a lone slow step, e.g. a GC pause, does not count).
    """
    n = len(dur)
    if n < MIN_FOR_WARMUP:
        return 1 if n > 1 else 0
    steady_med = float(np.nanmedian(dur[n // 2:]))
    smooth = pd.Series(dur).rolling(5, center=True, min_periods=1).median().to_numpy(copy=True)
    smooth[np.isnan(smooth)] = steady_med  # profiled steps carry no latency
    ok = smooth <= steady_med * (1 + SETTLE_TOLERANCE)
    hold = int(min(50, max(5, n // 50)))
    # held[i]: ok for all of i .. i+hold-1 (the tail counts as held)
    bad = np.concatenate([np.cumsum(~ok), np.full(hold, np.sum(~ok))])
    held = (bad[hold:hold + n] - np.concatenate([[0], bad[:n - 1]])) == 0
    idx = np.flatnonzero(held[1:])
    # the first call always belongs to startup; never let warm-up eat more than half
    return int(min(idx[0] + 1 if len(idx) else n // 2, n // 2))


def one_off_shapes(shapes: np.ndarray | pd.Series) -> np.ndarray:
    """Which steps are leading warm-up calls on an input shape that never occurs again.

    Pre-warming every expected shape with a dummy batch is the standard idiom: those
    calls' outputs are thrown away, so all of their time is one-time cost. Only
    counted when the steps after them repeat their shapes (with a new shape on every
    step, as in a growing decode context, a one-off shape says nothing), and where the
    one-off steps are most of the prefix they end. A short batch job may pre-warm more
    shapes than it then scores: the prefix may be most of the run, with at least 2
    repeating steps after it.
    """
    n = len(shapes)
    out = np.zeros(n, dtype=bool)
    if n < 4:
        return out
    # a string column is factorized as it is (no copy to Python objects); NA (None, NaN) -> -1
    codes, uniques = pd.factorize(shapes.array if isinstance(shapes, pd.Series) else np.asarray(shapes, dtype=object))
    if (codes < 0).any():
        return out
    once = np.bincount(codes, minlength=len(uniques))[codes] == 1
    cand = np.flatnonzero(once[: n - 2])
    if not len(cand):
        return out
    # distinct shapes after step j: the shapes whose last occurrence lies beyond j
    _, first_from_end = np.unique(codes[::-1], return_index=True)
    last = np.sort(n - 1 - first_from_end)  # each shape's last index
    distinct_after = len(last) - np.searchsorted(last, cand + 1, side="left")
    rest = n - cand - 1
    ok = (np.cumsum(once)[cand] * 2 >= cand + 1) & (distinct_after * 2 <= rest)
    if ok.any():  # the longest qualifying prefix
        j = int(cand[np.flatnonzero(ok)[-1]])
        out[: j + 1] = once[: j + 1]
    return out


def host_slowed(ts: np.ndarray, lat: np.ndarray, k: int) -> bool:
    """Whether the slow steps before `k` came with the program's work between steps slowed alike.

    A warm-up is the model settling (allocations, autotuning, compiling, caches filling): its
    steps are slow, the program's own work between them is not. When the time between steps
    stretched by at least half as much as the steps did, the whole process ran slower (CPU clocks,
    a neighbour on the host): nothing warmed up, and that stretch is steady state, not one-time cost.
    """
    if k < MIN_FOR_WARMUP or len(ts) - k < MIN_FOR_WARMUP:
        return False
    gap = np.diff(ts).astype(float) - lat[:-1]  # time after each step until the next one starts
    warm_step, steady_step = np.nanmedian(lat[1:k]), np.nanmedian(lat[k:])
    warm_gap, steady_gap = np.nanmedian(gap[1:k]), np.nanmedian(gap[k:])
    if not (steady_step > 0 and steady_gap > 0 and warm_step > steady_step):
        return False
    return warm_gap / steady_gap - 1 >= 0.5 * (warm_step / steady_step - 1)


SETUP_PAUSE_GAPS = 10  # a pause between steps this many steady gaps long...
SETUP_PAUSE_MIN_S = 0.1  # ...and at least this long is set-up work between warm-up steps


def after_setup_pauses(ts: np.ndarray, dur: np.ndarray) -> int:
    """Index of the first step after the last set-up pause (0: none).

    Work between warm-up steps (compiling, serializing, writing and reading back a
    cache, per input bucket) is warm-up even where each step's latency has already
    settled. A set-up pause is a time between two steps (outside them) at least
    SETUP_PAUSE_GAPS times the median such time of the last quarter of the steps
    and at least SETUP_PAUSE_MIN_S, that does not recur in that last quarter (a
    pause that recurs, as between bursts of requests, is the program's rhythm). At
    least MIN_FOR_WARMUP // 2 steps must follow it.
    """
    n = len(ts)
    if n < MIN_FOR_WARMUP:
        return 0
    gap = (ts[1:] - (ts[:-1] + dur[:-1])).astype(float)
    tail = gap[-max(2, len(gap) // 4):]
    thr = max(SETUP_PAUSE_GAPS * float(np.median(np.clip(tail, 0, None))), SETUP_PAUSE_MIN_S * 1e9)
    if (tail >= thr).any():
        return 0
    long = np.flatnonzero(gap >= thr)
    if not len(long) or n - (int(long[-1]) + 1) < MIN_FOR_WARMUP // 2:
        return 0
    return int(long[-1]) + 1


def _phases_from(basis: str, run: Run, ts: np.ndarray, dur: np.ndarray, valid: np.ndarray,
                 end_ns: int, shapes: pd.Series | None = None) -> tuple[Span, Span | None, Span, int]:
    start = run.start_ns
    first_end = int(ts[0] + dur[0])
    startup = Span("startup", start, max(start, first_end))
    lat = np.where(valid, dur.astype(float), np.nan)
    k = settle_index(lat)
    if basis == "steps" and host_slowed(ts, lat, k):
        k = 1
    if shapes is not None:
        one_off = np.flatnonzero(one_off_shapes(shapes))
        if len(one_off):
            k = max(k, int(one_off[-1]) + 1)
    if basis == "steps":
        k = max(k, after_setup_pauses(ts, dur))
    if k <= 1 or k >= len(ts):
        warm_end = startup.end_ns
        warmup = None
    else:
        warm_end = max(startup.end_ns, int(ts[k]))
        warmup = Span("warmup", startup.end_ns, warm_end)
    steady = Span("steady", warm_end, max(warm_end, end_ns))
    return startup, warmup, steady, max(0, k - 1)


def compute_phases(run: Run) -> Phases:
    """Split the run into startup, warm-up and steady state."""
    steps = complete(run, "steps")
    requests = run_requests(run)
    last_end = []
    if not steps.empty:
        last_end.append(int((steps["ts_ns"] + steps["dur_ns"]).max()))
    if not requests.empty:
        last_end.append(int((requests["ts_ns"] + requests["dur_ns"]).max()))

    main = main_thread(steps)
    if imported(run) and last_end:
        # a profiler trace holds a few warm steps, no process start: all of it is steady state
        firsts = [int(t["ts_ns"].min()) for t in (steps, requests) if not t.empty]
        pid, tid = main if main is not None else (None, None)
        return Phases("steps" if main else "requests", None, None, Span("steady", min(firsts), max(last_end)),
                      pid, tid)
    if main is not None:
        pid, tid = main
        on = (steps["pid"].to_numpy() == pid) & (steps["tid"].to_numpy() == tid)
        cols = ["ts_ns", "dur_ns", "in_window"] + (["shapes"] if "shapes" in steps.columns else [])
        mine = steps[cols][on]  # sorted by ts_ns already
        ends = steps["ts_ns"].to_numpy(dtype=np.int64) + steps["dur_ns"].to_numpy(dtype=np.int64)
        # startup ends with the first step anywhere (a worker thread may step first)
        ts = mine["ts_ns"].to_numpy(dtype=np.int64)
        dur = mine["dur_ns"].to_numpy(dtype=np.int64)
        valid = ~as_bool(mine["in_window"])
        if not valid.any():  # every step was profiled: their latency is all there is
            valid[:] = True
        shapes = mine["shapes"] if "shapes" in mine.columns else None
        startup, warmup, steady, nwarm = _phases_from("steps", run, ts, dur, valid, max(last_end), shapes)
        startup.end_ns = min(startup.end_ns, int(ends.min()))
        served = requests[requests["source"].isin(["asgi", "wsgi"]).to_numpy()]
        if warmup is not None and not served.empty:
            # a server's step latency follows its load and batch sizes, not warm-up: the steady
            # state starts once the first request has been served
            first = int((served["ts_ns"] + served["dur_ns"]).min())
            warmup.end_ns = steady.start_ns = max(startup.end_ns, min(warmup.end_ns, first))
            if warmup.end_ns <= startup.end_ns:
                warmup = None
        if warmup is not None:
            warmup.start_ns = startup.end_ns
        elif steady.start_ns > startup.end_ns:
            steady.start_ns = startup.end_ns
        return Phases("steps", startup, warmup, steady, pid, tid, nwarm)
    if not requests.empty:
        req = requests[["ts_ns", "dur_ns"]]
        ts = req["ts_ns"].to_numpy(dtype=np.int64)
        dur = req["dur_ns"].to_numpy(dtype=np.int64)
        startup, warmup, steady, nwarm = _phases_from("requests", run, ts, dur, np.ones(len(ts), bool),
                                                      max(last_end))
        return Phases("requests", startup, warmup, steady, warmup_steps=nwarm)
    return Phases("run", None, None, Span("steady", run.start_ns, max(run.start_ns, run.end_ns)))

