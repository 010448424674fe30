"""Interval arithmetic over numpy arrays of nanoseconds (vectorised, no loops per row)."""

from __future__ import annotations

import numpy as np


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals, as sorted non-overlapping (starts, ends)."""
    if len(starts) == 0:
        return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    raw = np.asarray(starts)
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if not (raw[1:] >= raw[:-1]).all():  # tables come sorted by start: sort only when they are not
        order = np.argsort(raw, kind="stable")
        s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    # a new merged interval begins where a start lies beyond everything before it
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    last = np.append(idx[1:] - 1, len(s) - 1)
    return s[idx], reach[last]


def clipped_total(starts: np.ndarray, ends: np.ndarray, a: int, b: int) -> int:
    """Total length of the union of intervals inside [a, b]."""
    s, e = merge(starts, ends)
    if len(s) == 0 or b <= a:
        return 0
    lo = np.clip(s, a, b)
    hi = np.clip(e, a, b)
    return int(np.sum(hi - lo))


def inside(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Boolean mask: which timestamps fall inside any interval."""
    ts = np.asarray(ts, dtype=np.int64)
    if len(starts) == 0:
        return np.zeros(len(ts), dtype=bool)
    raw = np.asarray(starts)
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if not (raw[1:] >= raw[:-1]).all():  # as in merge: sort only when not sorted by start
        order = np.argsort(raw, kind="stable")
        s, e = s[order], e[order]
    # t is inside the union iff some interval starting at or before t ends after it: no need to
    # build the union, the running maximum of the ends says it (reach[0]: no interval starts by t)
    reach = np.empty(len(e) + 1, dtype=np.int64)
    reach[0] = np.iinfo(np.int64).min
    np.maximum.accumulate(e, out=reach[1:])
    return ts < reach[np.searchsorted(s, ts, side="right")]


def overlaps(a_starts: np.ndarray, a_ends: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Boolean mask over the `a` intervals: which overlap any of the other intervals."""
    s, e = merge(starts, ends)
    a_s = np.asarray(a_starts, dtype=np.int64)
    a_e = np.asarray(a_ends, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(len(a_s), dtype=bool)
    # the last merged interval starting before a's end must end after a's start
    i = np.searchsorted(s, a_e, side="left") - 1
    ok = i >= 0
    out = np.zeros(len(a_s), dtype=bool)
    out[ok] = e[i[ok]] > a_s[ok]
    return out


def value_at(ts: np.ndarray, values: np.ndarray, t: int) -> float | None:
    """The last value of a cumulative counter at or before t (sorted ts); the first after if none."""
    if len(ts) == 0:
        return None
    i = int(np.searchsorted(ts, t, side="right")) - 1
    v = values[max(i, 0)]
    return None if v is None or v != v else float(v)


def covered(starts: np.ndarray, ends: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each [a_i, b_i): how much of it the union of the intervals covers (ns)."""
    s, e = merge(starts, ends)
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(len(a), dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(e - s)])  # union length before merged interval i

    def cum(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(s, t, side="right")  # merged intervals starting at or before t
        last = np.clip(i - 1, 0, None)
        partial = np.where(i > 0, np.clip(t - s[last], 0, e[last] - s[last]), 0)
        return before[np.clip(i - 1, 0, None)] * (i > 0) + partial

    return np.maximum(0, cum(b) - cum(a))
