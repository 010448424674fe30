"""What every metric module needs: the run, its phases, and the steady window's rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from diag.analysis.columns import as_bool, complete
from diag.analysis.phases import Phases, Span
from diag.analysis.ranges import requests as request_rows
from diag.analysis.ranges import run_requests
from diag.analysis.stacks import model_frames
from diag.store.run import Run


@dataclass
class Context:
    """The run seen through one window (normally the steady state)."""

    run: Run
    phases: Phases
    span: Span
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def t0(self) -> int:
        return self.span.start_ns

    @property
    def t1(self) -> int:
        return self.span.end_ns

    @property
    def seconds(self) -> float:
        return self.span.duration_s

    @property
    def main(self) -> tuple[int, int] | None:
        if self.phases.main_pid is None or self.phases.main_tid is None:
            return None
        return self.phases.main_pid, self.phases.main_tid

    def window(self, name: str, by_end: bool = False) -> pd.DataFrame:
        """Rows of table `name` that start inside the window (or, for intervals, overlap it).

        Tables are sorted by ts_ns, so this is a slice (no copy) in the usual case.
        """
        key = f"{name}:{by_end}"
        if key not in self._cache:
            df = complete(self.run, name)
            if not df.empty:
                ts = df["ts_ns"].to_numpy(dtype=np.int64)
                if by_end and "dur_ns" in df.columns:
                    hi = int(np.searchsorted(ts, self.t1, side="left"))
                    lo = int(np.searchsorted(ts, self.t0, side="left"))
                    head = df["dur_ns"].iloc[:lo]
                    dur = (head.to_numpy(dtype=np.int64) if head.dtype.kind in "iu" and isinstance(head.dtype, np.dtype)
                           else pd.to_numeric(head, errors="coerce").fillna(0).to_numpy(dtype=np.int64))
                    early = np.flatnonzero(ts[:lo] + dur > self.t0)  # started before, still running
                    if len(early) == 0:
                        df = df.iloc[lo:hi]
                    elif len(early) == lo - early[0]:  # a contiguous run just before t0
                        df = df.iloc[int(early[0]):hi]
                    else:
                        df = pd.concat([df.iloc[early], df.iloc[lo:hi]])
                else:
                    lo = int(np.searchsorted(ts, self.t0, side="left"))
                    hi = int(np.searchsorted(ts, self.t1, side="right"))
                    df = df.iloc[lo:hi]
            self._cache[key] = df
        return self._cache[key]

    def steps(self, main_only: bool = False, profiled: bool = True, cols: list[str] | None = None) -> pd.DataFrame:
        """Steps that start in the window; optionally only the stepping thread's, or no profiled ones."""
        df = self.window("steps")
        if df.empty:
            return df if cols is None else df[[c for c in cols if c in df.columns]]
        mask = np.ones(len(df), dtype=bool)
        if main_only and self.main is not None:
            mask &= self.thread_mask(df, *self.main)
        if not profiled:
            unprofiled = ~as_bool(df["in_window"])
            if unprofiled[mask].any():  # an imported trace is all profiled steps: keep them then
                mask &= unprofiled
        if cols is not None:
            df = df[[c for c in cols if c in df.columns]]  # optional columns (weight) may be absent
        return df if mask.all() else df[mask]

    @staticmethod
    def thread_mask(df: pd.DataFrame, pid: int, tid: int | None = None) -> np.ndarray:
        """Rows of one process (and thread)."""
        mask = df["pid"].to_numpy() == pid
        if tid is not None:
            mask &= df["tid"].to_numpy() == tid
        return mask

    def thread_rows(self, df: pd.DataFrame, pid: int, tid: int | None, cols: list[str]) -> pd.DataFrame:
        """The given columns of the rows of one thread (or process): copies only what is asked."""
        cols = [c for c in cols if c in df.columns]  # optional columns (weight) may be absent
        if df.empty:
            return df[cols]
        return df[cols][self.thread_mask(df, pid, tid)]

    def requests(self) -> pd.DataFrame:
        """The requests that start in the window: a slice of the run's requests (built once per run)."""
        if "(requests)" not in self._cache:
            every = run_requests(self.run)  # sorted by ts_ns, as the tables it is built from
            ts = every["ts_ns"].to_numpy(dtype=np.int64)
            lo = int(np.searchsorted(ts, self.t0, side="left"))
            hi = int(np.searchsorted(ts, self.t1, side="right"))
            # the window's rows as `window` picks them; none: the empty union, with its columns
            mine = every.iloc[lo:hi].reset_index(drop=True) if hi > lo else request_rows(None, None)
            self._cache["(requests)"] = mine
        return self._cache["(requests)"]

    @property
    def stack_tid(self) -> int | None:
        """The stepping thread's id in the stacks table.

        Normally the steps' tid. Where py-spy's thread ids could not be mapped
        to native ids, the thread of the stepping process whose stacks are
        inside model calls (a torch Module call or an ORT run) the longest.
        """
        if "stack_tid" not in self._cache:
            self._cache["stack_tid"] = self._find_stack_tid()
        return self._cache["stack_tid"]

    def _find_stack_tid(self) -> int | None:
        if self.main is None:
            return None
        pid, tid = self.main
        st = self.window("stacks", by_end=True)
        if st.empty:
            return None
        mine = st[st["pid"].to_numpy() == pid]
        tids = mine["tid"].unique()
        if tid in set(tids.tolist()) or len(tids) == 0:
            return tid
        model = model_frames(mine["stack"]).to_numpy()
        dur = np.nan_to_num(pd.to_numeric(mine["dur_ns"], errors="coerce").to_numpy(dtype=float), nan=0.0)
        by_tid = pd.Series(np.where(model, dur, 0.0)).groupby(mine["tid"].to_numpy()).sum()
        if by_tid.max() <= 0:
            return None  # nothing says which thread steps: better no stack metrics than wrong ones
        return int(by_tid.idxmax())

    @property
    def hooks_ok(self) -> bool:
        """Whether the in-process hooks ran, so a missing copy, sync or GC row means none happened."""
        hooks = (self.run.manifest.get("collectors") or {}).get("hooks") or {}
        return hooks.get("status", "ok") == "ok"

    @property
    def device(self) -> str:
        """cuda when most steps ran on a GPU (or GPU samples exist without steps), else cpu."""
        if "device" not in self._cache:
            self._cache["device"] = device_of(self.run)  # type: ignore[assignment]
        return self._cache["device"]  # type: ignore[return-value]


def steady_context(run: Run, phases: Phases) -> Context:
    """The steady state's Context of `run`, one per run and phases: the metrics, the serving
    summary and the views share its windows and derived rows instead of slicing them again."""
    s = phases.steady
    key = f"(context {s.start_ns} {s.end_ns} {phases.main_pid} {phases.main_tid})"
    ctx = run._cache.get(key)
    if ctx is None:
        ctx = run._cache[key] = Context(run, phases, s)  # type: ignore[assignment]
    return ctx  # type: ignore[return-value]


def device_of(run: Run) -> str:
    """cuda when most steps ran on a GPU (or GPU samples exist without steps), else cpu."""
    steps = run.table("steps")
    counts = steps["device"].value_counts(dropna=True) if not steps.empty else pd.Series(dtype=int)
    if counts.sum() > 0:
        gpu = sum(n for dev, n in counts.items() if any(k in str(dev).lower() for k in ("cuda", "tensorrt", "rocm", "gpu")))
        return "cuda" if gpu > counts.sum() / 2 else "cpu"
    # steps that do not say where they ran (imported traces): GPU samples or kernels decide
    kernels = run.table("kernels")
    on_gpu = not run.table("gpu").empty or (not kernels.empty and (kernels["kind"] == "kernel").any())
    return "cuda" if on_gpu else "cpu"


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when either is missing or den is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return float(num) / float(den)


def num(s: pd.Series) -> np.ndarray:
    """A numeric column as floats (None and junk become NaN)."""
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biuf":  # already numbers: to_numeric would copy first
        return s.to_numpy(dtype=float)
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def mean_or_none(x: np.ndarray) -> float | None:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else None



