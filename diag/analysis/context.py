"""What every metric module needs: the run, its phases, and the steady window's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from diag.analysis.phases import Phases, Span, _bool
from diag.store.run import Run


@dataclass
class Context:
    """The run seen through one window (normally the steady state)."""

    run: Run
    phases: Phases
    span: Span
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

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
        """Rows of table `name` that start inside the window (or end in it, for intervals)."""
        key = f"{name}:{by_end}"
        if key not in self._cache:
            df = self.run.table(name)
            if not df.empty:
                ts = df["ts_ns"].to_numpy(dtype=np.int64)
                if by_end and "dur_ns" in df.columns:
                    end = ts + pd.to_numeric(df["dur_ns"], errors="coerce").fillna(0).to_numpy(dtype=np.int64)
                    mask = (end > self.t0) & (ts < self.t1)
                else:
                    mask = (ts >= self.t0) & (ts <= self.t1)
                df = df[mask]
            self._cache[key] = df
        return self._cache[key]

    def steps(self, main_only: bool = False, profiled: bool = True) -> pd.DataFrame:
        """Steps that start in the window; optionally only the stepping thread's, or no profiled ones."""
        df = self.window("steps")
        if df.empty:
            return df
        if main_only and self.main is not None:
            df = df[(df["pid"] == self.main[0]) & (df["tid"] == self.main[1])]
        if not profiled:
            df = df[~_bool(df["in_window"])]
        return df

    def requests(self) -> pd.DataFrame:
        df = self.window("ranges")
        return df[df["kind"] == "request"] if not df.empty else df

    @property
    def device(self) -> str:
        """cuda when the steps ran on a GPU (or GPU samples exist), else cpu."""
        steps = self.run.table("steps")
        if not steps.empty:
            dev = steps["device"].astype(str).str.lower()
            if dev.str.contains("cuda|tensorrt|rocm|gpu").mean() > 0.5:
                return "cuda"
            return "cpu"
        return "cuda" if not self.run.table("gpu").empty else "cpu"


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when either is missing or den is not positive."""
    if num is None or den is None or den <= 0:
        return None
    return float(num) / float(den)


def num(s: pd.Series) -> np.ndarray:
    """A numeric column as floats (None and junk become NaN)."""
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def mean_or_none(x: np.ndarray) -> float | None:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else None


def pct(x: np.ndarray, q: float) -> float | None:
    x = x[~np.isnan(x)]
    return float(np.percentile(x, q)) if len(x) else None
