"""Which rows are requests: decided here, once, for all of analysis.

A request is either a row of the `requests` table (found with no code change
by the ASGI/WSGI/generate hooks) or a `ranges` row of kind `request` (NVTX
`request`, `diag.request()`). The two are one set:

- a `ranges` request with `rid` > 0 ran inside a found request: it is that
  same request (marked by hand as well), so it is skipped;
- a `generate` row with a `parent` ran inside a found HTTP request: the
  parent is the request, the generate call is part of it.

Found requests carry their measured parts (`wait_ns`: arrival to handler
start, `handler_ns`: the handler call); requests marked by hand have neither
(NaN).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis.columns import complete
from diag.store.run import Run

REQUEST = "request"  # the `kind` of a request range (the recorder and importers set it)

# The columns of the union (ranges rows lack the measured parts: NaN there).
COLUMNS = ["ts_ns", "dur_ns", "pid", "tid", "rid", "source", "server", "route", "wait_ns", "handler_ns", "weight"]


def requests(ranges: pd.DataFrame, found: pd.DataFrame | None = None) -> pd.DataFrame:
    """The requests: `ranges` rows of kind request plus the rows of the `requests` table (`found`).

    Sorted by ts_ns, columns `COLUMNS` (`source` is `asgi`/`wsgi`/`generate`
    for found requests, the range's source — `diag`, `nvtx`... — for marked
    ones). Empty, with its columns, when there are none.
    """
    parts = []
    if ranges is not None and not ranges.empty:
        marked = ranges[ranges["kind"] == REQUEST]
        if "rid" in marked.columns and not marked.empty:
            rid = pd.to_numeric(marked["rid"], errors="coerce").fillna(0).to_numpy()
            marked = marked[rid <= 0]  # rid > 0: the found request it ran in, already counted
        if not marked.empty:
            parts.append(_frame(marked, None))
    if found is not None and not found.empty:
        f = found
        if "parent" in f.columns and "source" in f.columns:
            parent = pd.to_numeric(f["parent"], errors="coerce").fillna(0).to_numpy()
            f = f[~((f["source"].to_numpy() == "generate") & (parent > 0))]
        if not f.empty:
            parts.append(_frame(f, "found"))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("wait_ns", "handler_ns") else "int64"
                                          if c not in ("source", "server", "route") else "object")
                             for c in COLUMNS})
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if len(parts) > 1 or not out["ts_ns"].is_monotonic_increasing:
        out = out.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    return out


_EMPTY_TEXT = pd.array([""], dtype="str")


def _frame(df: pd.DataFrame, kind: str | None) -> pd.DataFrame:
    n = len(df)

    def number(name: str, default: float, dtype: type) -> np.ndarray:
        if name not in df.columns:  # the default as it is: no column of Python objects to convert
            return np.full(n, default, dtype=dtype)
        v = pd.to_numeric(df[name], errors="coerce")
        return (v if dtype is float else v.fillna(default)).to_numpy(dtype=dtype)

    def text(name: str) -> object:
        # a string column is kept as it is, and a missing one is one "" repeated: no round trip
        # through Python objects (the union is as long as the run's steps)
        if name not in df.columns:
            return _EMPTY_TEXT.take(np.zeros(n, dtype=np.intp))
        s = df[name]
        return s.array if s.dtype == _EMPTY_TEXT.dtype else s.to_numpy()

    out = pd.DataFrame({
        "ts_ns": df["ts_ns"].to_numpy(dtype=np.int64), "dur_ns": df["dur_ns"].to_numpy(dtype=np.int64),
        "pid": df["pid"].to_numpy(), "tid": df["tid"].to_numpy(),
        "rid": number("rid", 0, np.int64),
        "source": text("source"), "server": text("server"), "route": text("route"),
        "wait_ns": number("wait_ns", np.nan, float) if kind else np.full(n, np.nan),
        "handler_ns": number("handler_ns", np.nan, float) if kind else np.full(n, np.nan),
        "weight": number("weight", 1, np.int64),
    })
    if kind:  # -1: unknown
        for c in ("wait_ns", "handler_ns"):
            v = out[c].to_numpy()
            out[c] = np.where(v < 0, np.nan, v)
    return out


def run_requests(run: Run) -> pd.DataFrame:
    """Every request of the run (`requests` over its whole ranges and requests tables), built once per run."""
    key = "(requests union)"  # a derived table beside the stored ones: phases, latency, series... all ask
    cached = run._cache.get(key)
    if cached is None:
        cached = run._cache[key] = requests(complete(run, "ranges"), complete(run, "requests"))
    return cached


def found(run: Run) -> bool:
    """Whether the run holds any request at all, found or marked."""
    return not run_requests(run).empty
