"""Figures of a load (or of one sweep step) from its request rows: plain numbers, no printing."""

from __future__ import annotations

from typing import Any

import numpy as np

from diag.analysis.columns import weighted_percentile
from diag.analysis.latency import PERCENTILES
from diag.load.client import ERROR_KINDS


def _pct(values: list[float], q: float) -> float | None:
    return weighted_percentile(np.asarray(values, dtype=float), np.ones(len(values)), q) if values else None


def summarise(rows: list[dict[str, Any]], seconds: float, phase: str = "measure") -> dict[str, Any]:
    """Throughput, errors by kind and latency percentiles of the rows of `phase` over `seconds`.

    Latency (ms, from each request's due time) covers the requests that succeeded;
    the others are counted by kind. `throughput_per_s` counts successes only.
    """
    rows = [r for r in rows if r["phase"] == phase]
    ok_ms = [r["latency_ms"] for r in rows if r["error"] is None]
    lag_ms = [(r["sent_ns"] - r["ts_ns"]) / 1e6 for r in rows]
    errors = {k: 0 for k in ERROR_KINDS}
    for r in rows:
        if r["error"] is not None:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    n = len(rows)
    n_err = sum(errors.values())
    seconds = max(seconds, 1e-9)
    return {
        "requests": n, "ok": n - n_err, "errors": n_err, "errors_by_kind": errors,
        "error_rate": n_err / n if n else None,
        "offered_per_s": n / seconds, "throughput_per_s": (n - n_err) / seconds, "seconds": seconds,
        "mean_ms": float(np.mean(ok_ms)) if ok_ms else None,
        **{f"p{q}_ms": _pct(ok_ms, q) for q in PERCENTILES},
        "max_ms": max(ok_ms) if ok_ms else None,
        "send_lag_p50_ms": _pct(lag_ms, 50), "send_lag_p99_ms": _pct(lag_ms, 99),
        "send_lag_max_ms": max(lag_ms) if lag_ms else None,
        "bytes": sum(r["bytes"] for r in rows),
    }
