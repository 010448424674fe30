"""How the load reads in every view: the client/server percentile table, the SLO and sweep lines,
the sweep table. Formatting only: every number comes computed in Diagnosis.load
(diag.analysis.load.summary)."""

from __future__ import annotations

from typing import Any

from diag.analysis.units import format_value
from diag.engine.diagnosis import Diagnosis

PCT_KEYS = ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms")
SIDE_HEADERS = ("", "requests", "p50", "p90", "p95", "p99", "max")
SWEEP_HEADERS = ("level", "served", "errors", "p50", "p90", "p95", "p99", "max", "SLO")


def side_rows(d: Diagnosis) -> list[list[str]]:
    """Client and server percentiles in one table, a row per side (SIDE_HEADERS)."""
    return [[s["label"], format_value(s["count"], "count"), *(format_value(s.get(k), "ms") for k in PCT_KEYS)]
            for s in (d.load or {}).get("sides") or []]


def headline(d: Diagnosis) -> str:
    """`load 20/s offered (open loop) at URL: 19.8/s answered, 0.0% errors`."""
    L, m = d.load or {}, d.metrics
    if not L:
        return ""
    how = (f"{format_value(L.get('concurrency'), 'count')} in flight (closed loop)" if L.get("mode") == "closed"
           else f"{format_value(L.get('rate'), 'per_s')} offered (open loop)")
    text = (f"load {how} at {L.get('url')}: {format_value(m.get('load.achieved_per_s'), 'per_s')} answered of "
            f"{format_value(m.get('load.offered_per_s'), 'per_s')} sent, errors "
            f"{format_value(m.get('load.error_rate'), 'ratio')}")
    errs = L.get("errors_by_kind") or {}
    if errs:
        text += " (" + ", ".join(f"{k.replace('_', ' ')} {format_value(v, 'count')}" for k, v in errs.items()) + ")"
    return text


def slo_lines(d: Diagnosis) -> list[str]:
    out = []
    for c in (d.load or {}).get("slos") or []:
        unit = "ratio" if c.get("key") == "error_rate" else "ms"
        out.append(f"SLO {c['slo']}: {'held' if c['held'] else 'broken'} ({format_value(c.get('value'), unit)})")
    return out


def sweep_rows(d: Diagnosis) -> list[list[str]]:
    sw = (d.load or {}).get("sweep") or {}
    unit = "count" if sw.get("unit") == "concurrency" else "per_s"
    return [[format_value(s["level"], unit), format_value(s.get("throughput_per_s"), "per_s"),
             format_value(s.get("error_rate"), "ratio"), *(format_value(s.get(k), "ms") for k in PCT_KEYS),
             "held" if s.get("held") else "broken"] for s in sw.get("steps") or []]


def sweep_line(d: Diagnosis) -> str:
    sw = (d.load or {}).get("sweep") or {}
    if not sw:
        return ""
    unit = "count" if sw.get("unit") == "concurrency" else "per_s"
    return (f"sweep: highest {sw.get('unit')} meeting the SLOs {format_value(sw.get('best_level'), unit)}, "
            f"knee of the p99 curve {format_value(sw.get('knee_level'), unit)}")


def series(d: Diagnosis) -> dict[str, Any]:
    """The over-time series (t_s, sent_per_s, done_per_s, in_flight, server_per_s)."""
    return (d.load or {}).get("over_time") or {}


def renderables(d: Diagnosis) -> list[Any]:
    """The console's load block (rich): headline, client/server table, SLOs, the sweep."""
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = [Text(headline(d))]
    rows = side_rows(d)
    if rows:
        t = Table(box=None, pad_edge=False, show_edge=False)
        for i, h in enumerate(SIDE_HEADERS):
            t.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*r)
        out.append(t)
    out += [Text(line) for line in slo_lines(d)]
    srows = sweep_rows(d)
    if srows:
        t = Table(box=None, pad_edge=False, title="sweep")
        for h in SWEEP_HEADERS:
            t.add_column(h, justify="right")
        for r in srows:
            t.add_row(*r)
        out += [t, Text(sweep_line(d))]
    return out
