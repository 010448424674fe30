"""Plotly figures from the report's plain data (data.py). No run access here.

Plotly draws text as a small HTML subset (<b>, <br>, <a> ...), so a frame
named `<module>` would vanish and a hostile name could add markup: every
string from the target goes through `plotly_text()` before it reaches a
figure.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

# One small style for every figure (plotly's default template alone is ~6 kB a figure).
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
GRID = "#e6e8eb"
COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d"]
PHASE_COLORS = {"startup": "rgba(100,116,139,0.16)", "warmup": "rgba(217,119,6,0.14)",
                "steady": "rgba(5,150,105,0.07)"}
PERCENTILE_COLORS = {"p50": "#059669", "p90": "#d97706", "p95": "#ea580c", "p99": "#dc2626"}


def plotly_text(s: Any) -> str:
    """A target-provided string made literal for plotly's text renderer."""
    return html.escape(str(s), quote=True)


def _style(fig: go.Figure, height: int) -> go.Figure:
    fig.update_layout(
        template="none", height=height, font={"family": FONT, "size": 12, "color": "#1f2937"},
        margin={"l": 70, "r": 20, "t": 30, "b": 40}, paper_bgcolor="white", plot_bgcolor="white",
        colorway=COLORS, hoverlabel={"font": {"family": FONT}},
    )
    fig.update_xaxes(gridcolor=GRID, zeroline=False, linecolor="#9ca3af", showline=True)
    fig.update_yaxes(gridcolor=GRID, zeroline=False, linecolor="#9ca3af", showline=True)
    return fig


def timeline_figure(timeline: dict[str, Any], phases: list[dict[str, Any]], duration_s: float) -> go.Figure | None:
    """One panel per series group, all on one shared, zoomable time axis, phases shaded."""
    groups = timeline.get("groups") or []
    if not groups:
        return None
    rows = len(groups)
    spacing = 0.035
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=spacing,
                        subplot_titles=[plotly_text(g["title"]) for g in groups])
    panel = (1 - spacing * (rows - 1)) / rows
    legends: dict[str, Any] = {}
    for i, g in enumerate(groups, start=1):
        # Each panel gets its own legend beside it, colors restarting per panel.
        legend = "legend" if i == 1 else f"legend{i}"
        top = 1 - (i - 1) * (panel + spacing)
        legends[legend] = {"x": 1.01, "xanchor": "left", "y": top, "yanchor": "top", "font": {"size": 11},
                           "bgcolor": "rgba(255,255,255,0)", "tracegroupgap": 2}
        for j, s in enumerate(g["series"]):
            name = plotly_text(s["name"])
            fig.add_trace(go.Scatter(
                x=s["t_s"], y=s["values"], name=name, mode="lines", legend=legend, showlegend=True,
                line={"width": 1.3, "color": COLORS[j % len(COLORS)]},
                # The name goes in as data, not into the template, so braces in it mean nothing.
                meta=[name, plotly_text(s["unit"])], hovertemplate="%{meta[0]}: %{y:.3g} %{meta[1]}<extra></extra>",
            ), row=i, col=1)
        fig.update_yaxes(title_text=plotly_text(" / ".join(g["units"])), title_font={"size": 11}, row=i, col=1,
                         rangemode="tozero")
    for p in phases:
        fill = PHASE_COLORS.get(p["name"], "rgba(100,116,139,0.08)")
        fig.add_vrect(x0=p["start_s"], x1=p["end_s"], fillcolor=fill, line_width=0, layer="below",
                      row="all", col=1)
    fig.update_xaxes(title_text="time since the run started", row=rows, col=1)
    fig.update_xaxes(range=[0, max(duration_s, 1e-3)], hoverformat=".2f", ticksuffix=" s")
    _style(fig, height=80 + 150 * rows)
    fig.update_layout(hovermode="x unified", margin={"t": 30, "r": 190}, **legends)
    fig.update_annotations(font_size=12, xanchor="left", x=0)
    return fig


def latency_figure(kind: dict[str, Any]) -> go.Figure | None:
    """Histogram of step or request latency with p50/p90/p95/p99 marked."""
    h = kind["histogram"]
    if not h["counts"]:
        return None
    edges = h["edges"]
    centers = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    fig = go.Figure(go.Bar(x=centers, y=h["counts"], width=widths, marker={"color": "#93c5fd", "line": {"width": 0}},
                           name=kind["kind"], hovertemplate="%{x:.3g} ms: %{y} calls<extra></extra>"))
    top = max(h["counts"]) or 1
    for i, (name, value) in enumerate(kind["percentiles"].items()):
        if value is None:
            continue
        fig.add_vline(x=value, line={"color": PERCENTILE_COLORS.get(name, "#111"), "width": 1.5, "dash": "dash"})
        fig.add_annotation(x=value, y=top * (1.02 + 0.09 * (i % 2)), text=f"{name} {value:.3g} ms",
                           showarrow=False, xanchor="left", font={"size": 10, "color": PERCENTILE_COLORS.get(name)})
    fig.update_xaxes(title_text=f"{kind['kind']} latency (ms) · {kind['scope']}")
    fig.update_yaxes(title_text="count", range=[0, top * 1.22])
    fig.update_layout(showlegend=False, bargap=0)
    return _style(fig, height=320)


def breakdown_figure(breakdown: dict[str, Any]) -> go.Figure | None:
    """Share of steady-state wall time per part, one bar each (parts may overlap)."""
    parts = breakdown.get("parts") or []
    if not parts:
        return None
    labels = [p["part"] for p in parts][::-1]
    shares = [p["share"] * 100 for p in parts][::-1]
    fig = go.Figure(go.Bar(x=shares, y=labels, orientation="h", marker={"color": "#60a5fa"},
                           text=[f"{s:.1f}%" for s in shares], textposition="outside", cliponaxis=False,
                           hovertemplate="%{y}: %{x:.1f}% of steady-state time<extra></extra>"))
    fig.update_xaxes(title_text="% of steady-state wall time", range=[0, max(100, max(shares) * 1.1)])
    fig.update_layout(showlegend=False)
    fig = _style(fig, height=60 + 38 * len(parts))
    fig.update_layout(margin={"l": 150, "t": 10})
    return fig


def stacks_figure(stacks: dict[str, Any]) -> go.Figure | None:
    """Icicle of Python stacks (outermost frame at the top), sized by sampled time."""
    nodes = stacks.get("tree") or []
    if not nodes:
        return None
    fig = go.Figure(go.Icicle(
        ids=[n["id"] for n in nodes], parents=[n["parent"] for n in nodes],
        labels=[plotly_text(n["label"]) for n in nodes], values=[n["self_s"] for n in nodes],
        customdata=[n["total_s"] for n in nodes], branchvalues="remainder", maxdepth=10,
        tiling={"orientation": "v"}, root={"color": "#f3f4f6"},
        hovertemplate="%{label}<br>%{customdata:.2f} s sampled, %{percentRoot:.1%} of all<extra></extra>",
        marker={"colorscale": "Blues"},
    ))
    fig = _style(fig, height=520)
    fig.update_layout(margin={"l": 5, "r": 5, "t": 5, "b": 5})
    return fig


def kernels_figure(gpu_work: dict[str, Any]) -> go.Figure | None:
    """GPU time per kernel category in the kernel windows."""
    cats = gpu_work.get("categories") or []
    if not cats:
        return None
    cats = cats[::-1]
    fig = go.Figure(go.Bar(x=[(c["share"] or 0) * 100 for c in cats], y=[plotly_text(c["category"]) for c in cats],
                           orientation="h", marker={"color": "#a78bfa"},
                           customdata=[[c["total_ms"], c["count"]] for c in cats],
                           hovertemplate="%{y}: %{x:.1f}% (%{customdata[0]:.2f} ms, %{customdata[1]} calls)"
                                         "<extra></extra>"))
    fig.update_xaxes(title_text="% of GPU time in kernel windows")
    fig.update_layout(showlegend=False)
    fig = _style(fig, height=60 + 34 * len(cats))
    fig.update_layout(margin={"l": 100, "t": 10})
    return fig
