"""Findings about the load itself (diag load, diag profile --load): whether each SLO held and what
breaks it, what a sweep found, and, for a run of the client alone, the load instead of "too little
evidence". Engine-level, like the partial-run finding: they speak of the verdict, so they are made
once it is known.
"""

from __future__ import annotations

from typing import Any

from diag.analysis import load
from diag.analysis.metrics import unit
from diag.engine.diagnosis import Diagnosis, Evidence, Finding, Recommendation
from diag.store.run import Run

# Above this share of the tail's time before the handler, the wait is what breaks a latency SLO.
PRE_HANDLER_BREAKS = 0.5


def _ms(v: Any) -> str:
    if v is None:
        return "n/a"
    v = float(v)
    return f"{v / 1000:.2f} s" if v >= 10_000 else f"{v:.0f} ms" if v >= 100 else f"{v:.1f} ms"


def _value(check: dict[str, Any]) -> str:
    v = check.get("value")
    if check.get("key") == "error_rate":
        return "n/a" if v is None else f"{float(v):.1%}"
    return _ms(v)


def _ev(metrics: dict[str, float | None], *names: str) -> list[Evidence]:
    return [Evidence(n, metrics.get(n), unit(n)) for n in names if metrics.get(n) is not None]


def add_load_findings(run: Run, d: Diagnosis) -> None:
    """Add the load's findings to `d` (in place); nothing when the run had no load."""
    if not load.has_load(run):
        return
    m = d.metrics
    res = load.result(run)
    d.load = load.summary(run)
    new: list[Finding] = []
    if load.load_only(run):
        # the client's side alone: no server to judge, so no label; the load is what this run says
        d.findings = [f for f in d.findings if f.rule not in ("verdict.insufficient_evidence", "verdict.no_match")]
        new.append(_load_only(m, res))
    slo = _slo_finding(m, res, d.primary, load.load_only(run))
    if slo is not None:
        new.append(slo)
    sweep = _sweep_finding(m, res)
    if sweep is not None:
        new.append(sweep)
    at = 1 if d.findings and d.findings[0].rule == "run.partial" else 0
    d.findings[at:at] = new


def _load_only(m: dict[str, float | None], res: dict[str, Any]) -> Finding:
    settings = res.get("settings") or {}
    title = (f"Client side only: {m.get('load.achieved_per_s') or 0:.1f} requests/s answered of "
             f"{m.get('load.offered_per_s') or 0:.1f}/s sent, {m.get('load.error_rate') or 0:.1%} errors; latency "
             f"p50 {_ms(m.get('load.client_p50_ms'))}, p99 {_ms(m.get('load.client_p99_ms'))}, "
             f"max {_ms(m.get('load.client_max_ms'))}")
    if res.get("problem"):
        title += f" ({res['problem']})"
    words = " ".join(settings.get("argv") or [settings.get("url") or "URL"])
    text = ("This run holds the client's figures, not the server's: diag names no bottleneck. Profile the "
            "server under the same load to see where the time goes (before the handler, in it, in the model).")
    return Finding(rule="verdict.load_only", label=None, severity="info", title=title,
                   evidence=_ev(m, "load.requests", "load.offered_per_s", "load.achieved_per_s", "load.error_rate",
                                "load.client_p50_ms", "load.client_p99_ms", "load.in_flight_mean"),
                   recommendations=[Recommendation(text=text, code=f"diag profile --load '{words}' -- CMD ...")])


def _slo_finding(m: dict[str, float | None], res: dict[str, Any], primary: str | None,
                 load_only: bool) -> Finding | None:
    checks = res.get("slos") or []
    if not checks:
        return None
    sweep = bool(res.get("sweep"))
    shown = "; ".join(f"{c['slo']} {'held' if c['held'] else 'broken'} ({_value(c)})" for c in checks)
    where = ("at the sweep's best level" if sweep
             else f"at {m.get('load.offered_per_s') or 0:.1f} requests/s offered")
    broken = [c for c in checks if not c["held"]]
    ev = _ev(m, "load.client_p99_ms", "load.error_rate", "load.pre_handler_p99_ms", "load.handler_p99_ms",
             "load.tail_pre_handler_share", "load.offered_per_s", "load.achieved_per_s")
    if not broken:
        return Finding(rule="load.slo_held", label=None, severity="info", title=f"Every SLO held {where}: {shown}",
                       evidence=ev)
    recs = [Recommendation(text=_what_breaks(m, res, broken, primary, load_only))]
    return Finding(rule="load.slo_broken", label=None, severity="high",
                   title=f"SLO broken {where}: {shown}", evidence=ev, recommendations=recs)


def _what_breaks(m: dict[str, float | None], res: dict[str, Any], broken: list[dict[str, Any]],
                 primary: str | None, load_only: bool) -> str:
    """Which part of the request time grew (before the handler or in it), and the verdict that says why."""
    parts = []
    if any(c["key"] == "error_rate" for c in broken):
        kinds = ((res.get("stats") or {}).get("errors_by_kind") or {})
        top = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]) if v)
        parts.append(f"Errors break it ({top or 'none counted'}): timeouts and refusals mean the server "
                     "cannot keep up; 5xx are the handler failing.")
    if any(c["key"] != "error_rate" for c in broken):
        tail = m.get("load.tail_pre_handler_share")
        if tail is None:
            parts.append("Latency breaks it; " + ("this run saw only the client: profile the server under the "
                                                  "same load (diag profile --load) to see which part grows."
                                                  if load_only else "the server's requests were not matched to "
                                                  "the client's, so which part grew is not known."))
        elif tail >= PRE_HANDLER_BREAKS:
            parts.append(f"Latency breaks it, and the time before the handler is what grew: {tail:.0%} of the "
                         f"slowest requests' time passed before their handler ran (p99 "
                         f"{_ms(m.get('load.pre_handler_p99_ms'))} before it, {_ms(m.get('load.handler_p99_ms'))} "
                         "in it): requests queue because more arrive than the server serves at once.")
        else:
            parts.append(f"Latency breaks it, and the handler is what grew: {1 - tail:.0%} of the slowest "
                         f"requests' time was in the handler (p99 {_ms(m.get('load.handler_p99_ms'))}); "
                         "making each request cheaper is what helps.")
    if primary:
        parts.append(f"The verdict, {primary.replace('_', ' ')}, says why and what to change (its finding below).")
    sweep = res.get("sweep") or {}
    if sweep.get("best_level") is not None:
        parts.append(f"The sweep found {sweep['best_level']:.4g} the highest level that holds the SLOs.")
    return " ".join(parts)


def _sweep_finding(m: dict[str, float | None], res: dict[str, Any]) -> Finding | None:
    sweep = res.get("sweep") or {}
    if not sweep:
        return None
    per = "requests/s" if sweep.get("unit") == "rate" else "in flight"
    best, knee = sweep.get("best_level"), sweep.get("knee_level")
    slos = ", ".join(c["slo"] for c in res.get("slos") or []) or "the SLOs"
    if best is None:
        title = f"No level of the sweep met {slos}: the lowest tried already broke them"
    else:
        title = (f"The server holds {best:.4g} {per} within {slos} "
                 f"({sweep.get('best_throughput_per_s') or 0:.1f} requests/s served, p99 "
                 f"{_ms(sweep.get('best_p99_ms'))})")
    if knee is not None:
        title += f"; latency turns up at {knee:.4g} {per} (the knee)"
    return Finding(rule="load.sweep", label=None, severity="info", title=title,
                   evidence=_ev(m, "load.sweep_steps", "load.sweep_best_level", "load.sweep_best_per_s",
                                "load.sweep_knee_level"))
