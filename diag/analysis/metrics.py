"""The metric catalog and `compute_metrics(run, phases)`: every number rules and views use.

Metrics are steady-state unless prefixed `startup.`, `warmup.`, `coldstart.`,
`run.` or `ort.`. A metric the run has no data for is None (rules then do not
fire on it). docs/metrics.md is generated from `CATALOG`.
"""

from __future__ import annotations

from diag.analysis import (
    communication,
    gpu,
    graphs,
    host,
    latency,
    load,
    runtime,
    serving,
    shares,
    startup,
    trace_evidence,
)
from diag.analysis.catalog import Metric
from diag.analysis.context import steady_context
from diag.analysis.phases import Phases, compute_phases
from diag.store.run import Run

CATALOG: list[Metric] = (
    startup.METRICS + runtime.METRICS + shares.METRICS + latency.METRICS + gpu.METRICS + host.METRICS
    + graphs.METRICS + serving.METRICS + load.METRICS + communication.METRICS + trace_evidence.METRICS
)
BY_NAME: dict[str, Metric] = {m.name: m for m in CATALOG}


def unit(name: str) -> str:
    """The unit of a metric ('' when unknown)."""
    m = BY_NAME.get(name)
    return m.unit if m else ""


def compute_metrics(run: Run, phases: Phases | None = None) -> dict[str, float | None]:
    """Every catalog metric for `run` (None where the run holds no data for it)."""
    phases = phases or compute_phases(run)
    ctx = steady_context(run, phases)
    out: dict[str, float | None] = {m.name: None for m in CATALOG}
    out.update(startup.compute(run, phases, ctx.device))
    # trace_evidence last: it withdraws what a trace cannot show (inside_model_share of ProfilerSteps)
    for module in (runtime, shares, latency, gpu, host, graphs, serving, load, communication, trace_evidence):
        out.update(module.compute(ctx))
    unknown = set(out) - set(BY_NAME)
    if unknown:  # a module computed something the catalog does not describe
        raise AssertionError(f"metrics missing from the catalog: {sorted(unknown)}")
    return {k: _clean(v) for k, v in out.items()}


def _clean(v: float | None) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if f != f else f
