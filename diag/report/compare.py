"""The comparison as one self-contained HTML page: `diag compare A B -o compare.html`.

Same offline rules as `diag report`: the one Jinja2 environment (autoescape on),
plotly.js inlined once, each chart with `include_plotlyjs=False` and a fixed div
id. The tables are the console's rows (diag.views.compare), so both read alike.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from markupsafe import Markup

from diag.report import figures
from diag.report.output import report_path, write_text_atomic
from diag.report.render import _plotlyjs, chart_html, environment
from diag.views import compare as rows

KINDS = (("step", "steady.step_p"), ("request", "steady.request_p"), ("client", "client.p"))


def latency_figure(c: dict[str, Any], kind: str, prefix: str) -> go.Figure | None:
    """Percentiles of one kind of call, A beside B, each with its confidence interval."""
    lines = [f for f in c["figures"] if f["metric"].startswith(prefix) and f["unit"] == "ms"]
    if not lines:
        return None
    fig = go.Figure()
    for side, name, color in (("a", "A (before)", figures.COLORS[0]), ("b", "B (after)", figures.COLORS[1])):
        xs = [rows.label(f["metric"]).split()[-1] for f in lines]
        ys = [f[side] for f in lines]
        lo = [(f[side] - f[f"{side}_ci"][0]) if f[side] is not None and f[f"{side}_ci"] else 0 for f in lines]
        hi = [(f[f"{side}_ci"][1] - f[side]) if f[side] is not None and f[f"{side}_ci"] else 0 for f in lines]
        fig.add_bar(name=name, x=xs, y=ys, marker_color=color,
                    error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo})
    fig.update_layout(barmode="group", yaxis_title=f"{kind} latency (ms)", legend={"orientation": "h"})
    return figures._style(fig, 300)


def build_charts(c: dict[str, Any]) -> dict[str, Markup]:
    out = {}
    for kind, prefix in KINDS:
        fig = latency_figure(c, kind, prefix)
        if fig is not None:
            div_id = f"fig-compare-{kind}"
            out[div_id] = chart_html(fig, div_id)
    return out


def page_data(c: dict[str, Any], gate: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the template shows, as strings: the console's rows and a few headings."""
    return {
        "sides": rows.sides_text(c), "warnings": c["warnings"], "verdict": rows.verdict_text(c),
        "scores": _scores(c), "figure_head": ("figure", "A [95% CI]", "B [95% CI]", "change", "95% CI", ""),
        "figures": rows.figure_rows(c, with_sides_ci=True), "metric_head": rows.METRIC_HEAD,
        "metrics": rows.metric_rows(c, moved_only=False),
        "prediction_head": rows.PREDICTION_HEAD, "predictions": rows.prediction_rows(c, text_width=200),
        "environment": rows.environment_rows(c), "gate": rows.gate_rows(gate),
        "confidence": c["confidence"], "replicates": c["replicates"], "seed": c["seed"],
    }


def _scores(c: dict[str, Any]) -> list[tuple[str, float, float]]:
    a, b = c["verdict"]["a"]["scores"], c["verdict"]["b"]["scores"]
    return [(label, a.get(label) or 0.0, b.get(label) or 0.0) for label in (a or b)]


def render_compare_html(c: dict[str, Any], gate: list[dict[str, Any]] | None = None) -> str:
    """The whole page (plotly.js inline, once)."""
    template = environment().get_template("compare.html.j2")
    plotly = {"cdn": None, "inline": Markup(_plotlyjs())}
    return template.render(data=page_data(c, gate or []), charts=build_charts(c), plotly=plotly)


def write_compare_report(c: dict[str, Any], gate: list[dict[str, Any]] | None, out: str) -> str:
    """Write the page to `out` (replaced if it exists); returns the path. DiagError if unwritable."""
    path = report_path("", out)
    write_text_atomic(path, render_compare_html(c, gate))
    return path
