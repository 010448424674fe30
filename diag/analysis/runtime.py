"""Facts about the runtime: which device the steps used, ONNX Runtime provider fallback."""

from __future__ import annotations

import json
from typing import Any

from diag.analysis.catalog import Metric
from diag.analysis.context import Context

ACCELERATED = ("CUDAExecutionProvider", "TensorrtExecutionProvider", "ROCMExecutionProvider")

METRICS = [
    Metric("run.gpu", "flag", "1 when the steps ran on a GPU (or GPU samples exist without steps), else 0."),
    Metric("run.gpu_available", "flag", "1 when the host has a GPU (run.json or GPU samples), whether or not the steps used it."),
    Metric("ort.provider_fallback", "count", "ONNX Runtime sessions that asked for a GPU provider and did not get it."),
    Metric("ort.sessions", "count", "ONNX Runtime sessions created."),
]


def _providers(v: Any) -> list[str]:
    """Provider names; ONNX Runtime accepts names or (name, options) pairs."""
    if not isinstance(v, list):
        return []
    return [p[0] if isinstance(p, (list, tuple)) and p else str(p) for p in v]


def provider_fallback(requested: Any, got: Any) -> bool:
    """The one rule for a silent fallback: a GPU provider was asked for and none is in use.

    The recorder stores the facts (`ort_session` events: `requested`, `got`); this decides.
    """
    if not isinstance(got, list):
        return False  # what ran is unknown: no evidence of a fallback
    asked, used = _providers(requested), _providers(got)
    return any(p in ACCELERATED for p in asked) and not any(p in ACCELERATED for p in used)


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {"run.gpu": 1.0 if ctx.device == "cuda" else 0.0}
    count = (ctx.run.manifest.get("gpu") or {}).get("count") or 0
    out["run.gpu_available"] = 1.0 if count > 0 or not ctx.run.table("gpu").empty else 0.0
    ev = ctx.run.table("events")
    if ev.empty:
        return out
    sessions = ev[ev["kind"] == "ort_session"]
    if sessions.empty:
        return out
    fallback = 0
    for raw in sessions["detail"]:
        try:
            detail = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except ValueError:
            continue
        if not isinstance(detail, dict):
            continue
        fallback += provider_fallback(detail.get("requested"), detail.get("got"))
    out["ort.sessions"] = float(len(sessions))
    out["ort.provider_fallback"] = float(fallback)
    return out
