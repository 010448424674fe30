"""How a comparison reads (`diag compare`): plain rows of text first, then the console rendering.

`rows(comparison)` turns the analysis' dict (diag.analysis.compare, schema
diag.compare/1) into table rows of strings, every number through
diag.analysis.units.format_value; the console here, the TUI screen and the HTML
report all show those same rows. No computation beyond formatting.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from diag.analysis.units import format_value

NO_CHANGE = "no detectable change"

WORD_STYLE = {"faster": "bold green", "better": "green", "slower": "bold red", "worse": "red",
              "higher": "yellow", "lower": "yellow"}
FIGURE_HEAD = ("figure", "A", "B", "change", "95% CI", "")
METRIC_HEAD = ("metric", "A", "B", "change", "interval", "")
PREDICTION_HEAD = ("fix (A's diagnosis)", "predicted", "realised (95% CI)", "")
ENV_HEAD = ("", "A", "B", "")


def to_json_text(comparison: dict[str, Any], gate: list[dict[str, Any]] | None = None) -> str:
    """The one JSON object `diag compare --json` prints (schema diag.compare/1)."""
    return json.dumps({**comparison, "gate": gate or []}, allow_nan=False, default=str)


def label(metric: str) -> str:
    """A figure's short name: `steady.request_p99_ms` -> `request p99`, `client.p99_ms` -> `client p99`."""
    name = metric.split(".", 1)[-1].removesuffix("_ms")
    if metric.startswith("client."):
        name = "client " + name
    return name.replace("_per_s", "/s").replace("_", " ")


def _ci(ci: list[float] | None, unit: str) -> str:
    return f" [{format_value(ci[0], unit)}, {format_value(ci[1], unit)}]" if ci else ""


def change_text(line: dict[str, Any]) -> str:
    """'+12.3%' (a relative change; '3.10x' from +210% on), or '–' when there is none."""
    return format_value(None) if line["change"] is None else _pct(line["change"])


def change_ci_text(line: dict[str, Any]) -> str:
    """'[+8.1%, +15.0%]', or '' without an interval."""
    ci = line["change_ci"]
    return f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""


def _pct(v: float) -> str:
    if v >= 2:
        return f"{v + 1:.2f}x"
    return f"{v * 100:+.0f}%" if 0.1 <= abs(v) < 0.99 else f"{v * 100:+.1f}%"


def figure_rows(c: dict[str, Any], with_sides_ci: bool = False) -> list[tuple[str, ...]]:
    """Throughput and latency lines: name, A, B, change, its interval, word (and each side's interval)."""
    return [(label(f["metric"]), format_value(f["a"], f["unit"]) + (_ci(f["a_ci"], f["unit"]) if with_sides_ci else ""),
             format_value(f["b"], f["unit"]) + (_ci(f["b_ci"], f["unit"]) if with_sides_ci else ""),
             change_text(f), change_ci_text(f), f["word"])
            for f in c["figures"]]


def metric_rows(c: dict[str, Any], moved_only: bool = True) -> list[tuple[str, ...]]:
    """Key diagnosis metrics (those that moved beyond their noise, unless `moved_only` is off)."""
    return [(m["metric"], format_value(m["a"], m["unit"]), format_value(m["b"], m["unit"]),
             change_text(m), change_ci_text(m) or f"noise: {m['noise']}", m["word"])
            for m in c["metrics"] if not moved_only or m["word"] not in (NO_CHANGE, "not comparable")]


def prediction_rows(c: dict[str, Any], text_width: int = 0) -> list[tuple[str, ...]]:
    """A's recommendations with a gain: rule (and its fix, cut to `text_width`), predicted bound and
    point, realised factor with interval, whether it held."""
    out = []
    for p in c["predictions"]:
        pred = f"≤ {format_value(p['gain_max'], 'factor')}" if p["gain_max"] is not None else ""
        if p["gain_point"] is not None:
            pred += f" (point {format_value(p['gain_point'], 'factor')})"
        pred += " " + p["gain_on"].replace("_", " ")
        real = format_value(p["realised"], "factor") + _ci(p["realised_ci"], "factor")
        out.append((p["rule"] + (f": {_cut(p['text'], text_width)}" if text_width else ""), pred, real, held_text(p)))
    return out


def held_text(p: dict[str, Any]) -> str:
    """Whether a realised gain fell inside the predicted bound, and near the point prediction."""
    ci = p["realised_ci"]
    if p["realised"] is None:
        return "not measured"
    if ci and ci[0] <= 1 <= ci[1]:
        return NO_CHANGE
    held = {True: "inside the bound", False: "beyond the bound", None: ""}[p["within_bound"]]
    if p["near_point"] is not None:
        held += ("; " if held else "") + ("near the point" if p["near_point"] else "off the point by >25%")
    return held


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def environment_rows(c: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(e["field"], e["a"] or "–", e["b"] or "–", "differs" if e["differs"] else "")
            for e in c["environment"]]


def verdict_text(c: dict[str, Any]) -> list[str]:
    """'launch_bound (1.00) -> memory_bound (0.61)', then what moved."""
    v = c["verdict"]

    def side(s: dict[str, Any]) -> str:
        if not s["runs"]:
            return "no diagnosis (load run)"
        p = s["primary"]
        score = s["scores"].get(p) if p else None
        return f"{p or 'none'}" + (f" ({score:.2f})" if score is not None else "") + \
            ("" if s.get("agree", True) else ", runs disagree")

    out = [f"verdict: {side(v['a'])} -> {side(v['b'])}"]
    if v["moved"]:
        out.append("moved: " + ", ".join(f"{m['label']} {m['a'] or 0:.2f} -> {m['b'] or 0:.2f}" for m in v["moved"]))
    return out


def gate_rows(gate: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    out = []
    for g in gate:
        unit = "" if g["relative"] else "ms" if g["metric"].endswith("_ms") else ""
        value = (_pct(g["value"]) + f" [{_pct(g['ci'][0])}, {_pct(g['ci'][1])}]") if g["relative"] else \
            format_value(g["value"], unit) + _ci(g["ci"], unit)
        out.append((g["budget"], value, "BROKEN" if g["broken"] else "held"))
    return out


def sides_text(c: dict[str, Any]) -> list[str]:
    out = []
    for name in ("a", "b"):
        runs = c[name]
        paths = ", ".join(r["path"] for r in runs)
        out.append(f"{name.upper()}: {paths}" + (f"  ({len(runs)} runs)" if len(runs) > 1 else ""))
    return out


# -- console ---------------------------------------------------------------------------------------

def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], word_col: int | None = None) -> Table:
    t = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for i, h in enumerate(head):
        t.add_column(h, justify="left" if i == 0 or i == len(head) - 1 else "right", overflow="fold")
    for r in rows:
        cells: list[Any] = list(r)
        if word_col is not None:
            cells[word_col] = Text(r[word_col], style=WORD_STYLE.get(r[word_col], "dim"))
        t.add_row(*cells)
    return t


def build(c: dict[str, Any], gate: list[dict[str, Any]] | None = None) -> RenderableType:
    """The comparison as one rich renderable (tests render it to text)."""
    parts: list[RenderableType] = [Text("\n".join(sides_text(c)), style="dim")]
    for w in c["warnings"]:
        parts.append(Text(f"warning: {w}", style="bold yellow"))
    parts.append(Text("\n".join(verdict_text(c)), style="bold"))
    if c["figures"]:
        parts.append(_table(FIGURE_HEAD, figure_rows(c), word_col=5))
    else:
        parts.append(Text("no throughput or latency figure on both sides", style="dim"))
    moved = metric_rows(c)
    parts.append(Text("metrics that moved beyond their noise:" if moved else
                      "metrics: none moved beyond their noise", style="bold" if moved else "dim"))
    if moved:
        parts.append(_table(METRIC_HEAD, moved, word_col=5))
    preds = prediction_rows(c)
    if preds:
        parts.append(Text("predicted (A's diagnosis) vs realised (B):", style="bold"))
        parts.append(_table(PREDICTION_HEAD, preds))
        for p in c["predictions"][:1]:
            parts.append(Text(f"  top fix: {_cut(p['text'], 160)}", style="dim"))
    env = [r for r in environment_rows(c) if r[3]]
    if env:
        parts.append(Text("environment differs:", style="bold yellow"))
        parts.append(_table(ENV_HEAD, env))
    if gate:
        parts.append(Text("budgets:", style="bold"))
        t = _table(("budget", "value (95% CI)", ""), gate_rows(gate))
        parts.append(t)
    return Group(*parts)


def print_comparison(c: dict[str, Any], console: Console, gate: list[dict[str, Any]] | None = None) -> None:
    console.print(build(c, gate))
