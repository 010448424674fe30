"""Render the report's data into one self-contained HTML page.

One Jinja2 environment (autoescape on) for every template. plotly.js goes in
once per page (inline by default, or from plotly's CDN with `cdn=True`); each
figure is rendered with `include_plotlyjs=False` and a fixed div id, so tests
and links can find it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any

import plotly.io as pio
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from diag.analysis.units import format_cell, format_value
from diag.report import figures, load_section

PLOTLY_CONFIG = {"responsive": True, "displaylogo": False, "scrollZoom": False,
                 "modeBarButtonsToRemove": ["select2d", "lasso2d", "autoScale2d"]}


@functools.lru_cache(maxsize=1)
def environment() -> Environment:
    """The one template environment; autoescape is on for every template."""
    env = Environment(loader=PackageLoader("diag.report", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    # The same formatter as every other view: {{ x|value("ms") }}, {{ v|cell(column) }}.
    env.filters["value"] = format_value
    env.filters["cell"] = _cell
    return env


def _cell(value: Any, column: str) -> str:
    """Jinja filter: `{{ row.p50_ms|cell("p50_ms") }}`, formatted in the unit its column name carries."""
    return format_cell(column, value)


@functools.lru_cache(maxsize=1)
def _plotlyjs() -> str:
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    # Pasted into a <script> element: it must not be able to close it early.
    if "</script" in js.lower():
        raise RuntimeError("plotly.js bundle contains </script>; cannot inline it")
    return js


def plotly_cdn() -> dict[str, str]:
    """The CDN URL of the plotly.js that plotly.py bundles, with its SRI hash."""
    from plotly.io._utils import plotly_cdn_url  # the URL plotly's own to_html uses

    digest = hashlib.sha256(_plotlyjs().encode("utf-8")).digest()
    return {"url": plotly_cdn_url(), "integrity": "sha256-" + base64.b64encode(digest).decode()}


def chart_html(fig: Any, div_id: str) -> Markup:
    """One figure as a div and a script, with no plotly.js of its own.

    plotly serializes data with <, > and / escaped as \\u003c..., so a hostile
    string in the data cannot end the script element.
    """
    return Markup(pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                              config=PLOTLY_CONFIG, default_width="100%", validate=False))


def build_charts(data: dict[str, Any]) -> dict[str, Markup]:
    """Every chart the data allows, keyed by its fixed div id."""
    figs: dict[str, Any] = {
        "fig-timeline": figures.timeline_figure(data["timeline"], data["phases"], data["run"]["duration_s"]),
        "fig-breakdown": figures.breakdown_figure(data["breakdown"]),
        "fig-stacks": figures.stacks_figure(data["stacks"]),
        "fig-kernels": figures.kernels_figure(data["gpu_work"]),
        "fig-load": load_section.over_time_figure(data.get("load") or {}),
        "fig-load-sweep": load_section.sweep_figure(data.get("load") or {}),
    }
    for kind in data["latency"]["kinds"]:
        figs[f"fig-latency-{kind['kind']}"] = figures.latency_figure(kind)
    return {div_id: chart_html(fig, div_id) for div_id, fig in figs.items() if fig is not None}


def render_html(data: dict[str, Any], cdn: bool = False) -> str:
    """The whole page for the report data."""
    template = environment().get_template("report.html.j2")
    plotly = {"cdn": plotly_cdn(), "inline": None} if cdn else {"cdn": None, "inline": Markup(_plotlyjs())}
    return template.render(data=data, charts=build_charts(data), plotly=plotly, phase_colors=figures.PHASE_COLORS)
