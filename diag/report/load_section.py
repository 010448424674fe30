"""The report's Load section: plain data from Diagnosis.load (formatted by diag.views.load) and its
two Plotly figures (requests/s and in flight over time; for a sweep, latency percentiles vs the
offered level). No arithmetic here: the series come computed (diag.analysis.load)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from diag.engine.diagnosis import Diagnosis
from diag.report.figures import PERCENTILE_COLORS, _style, plotly_text
from diag.views import load as load_view


def load_data(d: Diagnosis) -> dict[str, Any]:
    """What the section shows; {} when the run had no load."""
    if not d.load:
        return {}
    sw = d.load.get("sweep") or {}
    return {
        "headline": load_view.headline(d),
        "side_headers": list(load_view.SIDE_HEADERS), "sides": load_view.side_rows(d),
        "slos": load_view.slo_lines(d), "sweep_line": load_view.sweep_line(d),
        "sweep_headers": list(load_view.SWEEP_HEADERS), "sweep_rows": load_view.sweep_rows(d),
        "series": load_view.series(d),
        "sweep_points": [{k: s.get(k) for k in ("level", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "held")}
                         for s in sw.get("steps") or []],
        "sweep_unit": sw.get("unit") or "rate", "sweep_best": sw.get("best_level"), "sweep_knee": sw.get("knee_level"),
    }


def over_time_figure(data: dict[str, Any]) -> go.Figure | None:
    """Requests/s (sent, answered, reaching the server) and requests in flight over the load."""
    s = (data or {}).get("series") or {}
    if not s.get("t_s"):
        return None
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for key, name in (("sent_per_s", "sent/s"), ("done_per_s", "answered/s"), ("server_per_s", "server arrivals/s")):
        if s.get(key):
            fig.add_trace(go.Scatter(x=s["t_s"], y=s[key], name=plotly_text(name), mode="lines"), row=1, col=1)
    fig.add_trace(go.Scatter(x=s["t_s"], y=s["in_flight"], name="in flight", mode="lines", fill="tozeroy"),
                  row=2, col=1)
    fig.update_yaxes(title_text="requests/s", row=1, col=1)
    fig.update_yaxes(title_text="in flight", row=2, col=1)
    fig.update_xaxes(title_text="seconds since the run started", row=2, col=1)
    return _style(fig, 420)


def sweep_figure(data: dict[str, Any]) -> go.Figure | None:
    """Latency percentiles vs the offered level, the best level and the knee marked."""
    pts = (data or {}).get("sweep_points") or []
    if not pts:
        return None
    fig = go.Figure()
    x = [p["level"] for p in pts]
    for q in ("p50", "p90", "p95", "p99"):
        fig.add_trace(go.Scatter(x=x, y=[p.get(f"{q}_ms") for p in pts], name=q, mode="lines+markers",
                                 line={"color": PERCENTILE_COLORS[q]}))
    for level, name, dash in ((data.get("sweep_best"), "highest meeting the SLOs", "dash"),
                              (data.get("sweep_knee"), "knee", "dot")):
        if level is not None:
            fig.add_vline(x=level, line_dash=dash, line_color="#6b7280", annotation_text=name)
    unit = "requests in flight" if data.get("sweep_unit") == "concurrency" else "offered requests/s"
    fig.update_xaxes(title_text=unit)
    fig.update_yaxes(title_text="latency (ms)", rangemode="tozero")
    return _style(fig, 360)
