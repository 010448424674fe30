"""Column helpers shared by the analysis modules: nullable booleans, rows that can be placed in time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from diag.store.run import Run


def as_bool(s: pd.Series) -> np.ndarray:
    """A boolean column that may hold None or NaN (missing means False)."""
    if s.dtype == bool:
        return s.to_numpy()
    return s.eq(True).to_numpy()


def complete(run: Run, name: str) -> pd.DataFrame:
    """Table `name` without rows lacking a start or (for intervals) a duration.

    A killed run leaves ranges that never closed, and a sampler may write
    nulls; neither can be placed in time.
    """
    df = run.table(name)
    if df.empty:
        return df
    bad = df["ts_ns"].isna().to_numpy()
    if "dur_ns" in df.columns:
        bad = bad | df["dur_ns"].isna().to_numpy()
    if not bad.any():
        return df
    df = df[~bad].copy()
    df["ts_ns"] = df["ts_ns"].astype(np.int64)
    if "dur_ns" in df.columns:
        df["dur_ns"] = df["dur_ns"].astype(np.int64)
    return df


def weights(df: pd.DataFrame) -> np.ndarray:
    """How many real rows each row stands for (the recorder keeps 1 in k rows of long tables)."""
    if "weight" not in df.columns:
        return np.ones(len(df))
    w = pd.to_numeric(df["weight"], errors="coerce").to_numpy(dtype=float)
    return np.where(np.isnan(w) | (w < 1), 1.0, w)


def weighted_percentile(values: np.ndarray, w: np.ndarray, q: float) -> float | None:
    """The q-th percentile of values, each counted w times (NaN values ignored)."""
    return weighted_percentiles(values, w, (q,))[0]


def weighted_percentiles(values: np.ndarray, w: np.ndarray, qs: Sequence[float]) -> list[float | None]:
    """The qs-th percentiles of values, each counted w times (NaN values ignored): one sort for all q."""
    ok = ~np.isnan(values)
    values, w = values[ok], w[ok]
    if not len(values):
        return [None] * len(qs)
    if np.all(w == w[0]):
        return [float(v) for v in np.percentile(values, list(qs))]
    order = np.argsort(values, kind="stable")
    v, cw = values[order], np.cumsum(w[order])
    i = np.searchsorted(cw, np.asarray(qs, dtype=float) / 100.0 * cw[-1], side="left")
    return [float(v[min(int(k), len(v) - 1)]) for k in i]
