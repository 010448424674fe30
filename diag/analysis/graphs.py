"""CUDA graphs and torch.compile: what the program already does, so advice starts from there.

Reads the facts the recorder's graph hooks write (diag/collect/hooks/cuda_graph.py):
`cuda_graph` events (`capture`, `summary`), `compile` events (`torch.compile`
with its mode, `summary` with dynamo's counters) and the steps whose source
is `cuda_graph` (outermost replays).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from diag.analysis.catalog import Metric
from diag.analysis.columns import weights
from diag.analysis.context import Context

# torch.compile modes whose inductor backend replays CUDA graphs (cudagraph trees) on a GPU.
GRAPH_MODES = ("reduce-overhead", "max-autotune")

METRICS = [
    Metric("run.cuda_graphs", "flag", "1 when the program captures or replays CUDA graphs (by hand, or torch.compile mode='reduce-overhead'/'max-autotune' on a GPU), else 0."),
    Metric("run.compiled", "flag", "1 when the program calls torch.compile (or dynamo compiled frames), else 0."),
    Metric("run.graphs_captured", "count", "CUDA graphs captured in the run."),
    Metric("run.graph_replays", "count", "CUDA graph replays in the run (outermost ones are steps, nested ones are counted)."),
    Metric("run.recompiles", "count", "torch.compile recompilations (dynamo guard failures: a new shape, dtype or Python value)."),
    Metric("run.graph_breaks", "count", "torch.compile graph breaks (dynamo's count: code it could not put in one graph)."),
    Metric("coldstart.compile_s", "s", "Time torch.compile spent compiling (dynamo frames, inductor included): part of the first steps' and warm-up cost."),
    Metric("steady.cuda_graph_steps_share", "ratio", "Share of steady-state steps that replay a CUDA graph (an outermost replay, or a compiled call that replays one)."),
]


def _details(ev: pd.DataFrame, kind: str, name: str | None = None) -> list[dict[str, Any]]:
    rows = ev[ev["kind"] == kind]
    if name is not None:
        rows = rows[rows["name"] == name]
    out = []
    for raw in rows["detail"]:
        try:
            d = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def _total(rows: list[dict[str, Any]], key: str) -> float | None:
    """Sum of a summary key over processes (each writes one summary at exit)."""
    vals = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float))]
    return float(sum(vals)) if vals else None


def _is_replay(steps: pd.DataFrame) -> np.ndarray:
    """Which steps are outermost CUDA graph replays (compared in the column's own storage: turning
    a long string column into Python objects first costs more than the comparison)."""
    return steps["source"].eq("cuda_graph").to_numpy(dtype=bool, na_value=False)


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    run = ctx.run
    ev = run.table("events")
    all_steps = run.table("steps")
    if ev.empty:
        ev = pd.DataFrame(columns=["kind", "name", "detail"])
    replay_src = _is_replay(all_steps) if not all_steps.empty else np.zeros(0, bool)
    g_sum = _details(ev, "cuda_graph", "summary")
    captures = int((ev["kind"] == "cuda_graph").sum() - len(g_sum)) if len(ev) else 0
    captured = _total(g_sum, "captured")
    replays = _total(g_sum, "replays")
    replay_steps_total = float(weights(all_steps[replay_src]).sum()) if replay_src.any() else 0.0
    out["run.graphs_captured"] = captured if captured is not None else float(captures)
    out["run.graph_replays"] = replays if replays is not None else replay_steps_total

    calls = _details(ev, "compile", "torch.compile")
    c_sum = _details(ev, "compile", "summary")
    modes = {str(c.get("mode") or "default") for c in calls}
    compiled = bool(calls) or bool(c_sum)
    graph_mode = ctx.device == "cuda" and any(m in GRAPH_MODES for m in modes)
    graphs = bool(out["run.graphs_captured"]) or bool(out["run.graph_replays"]) or graph_mode
    out["run.compiled"] = 1.0 if compiled else 0.0
    out["run.cuda_graphs"] = 1.0 if graphs else 0.0
    if c_sum:
        out["run.recompiles"] = _total(c_sum, "recompiles")
        out["run.graph_breaks"] = _total(c_sum, "graph_breaks")
        out["coldstart.compile_s"] = _total(c_sum, "compile_s")

    steady = ctx.steps(main_only=True, profiled=False, cols=["source", "weight"])
    if not steady.empty and graphs:
        w = weights(steady)
        is_replay = _is_replay(steady)
        share = float(w[is_replay].sum()) / max(1.0, float(w.sum()))
        # replays nested in other steps (a compiled call's cudagraph tree): spread over those steps
        nested = (out["run.graph_replays"] or 0.0) - replay_steps_total
        others = float(weights(all_steps).sum()) - replay_steps_total if not all_steps.empty else 0.0
        if nested > 0 and others > 0:
            share += min(1.0, nested / others) * (1.0 - share)
        out["steady.cuda_graph_steps_share"] = min(1.0, share)
    elif not steady.empty:
        out["steady.cuda_graph_steps_share"] = 0.0
    return out
