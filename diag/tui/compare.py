"""The comparison in the TUI: `diag compare A B --tui`.

One screen of tables, the console's rows (diag.views.compare): verdicts, the
throughput and latency figures with their intervals and words, key metrics,
predicted vs realised, environment and budgets. `make_compare_app(comparison)`
builds it (tests make one from a comparison dict); the data is computed before.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from diag.errors import DiagError
from diag.views import compare as rows

_WORD_COLS = {"figures": 5, "metrics": 5}


class CompareApp(App[int]):
    """A before/after comparison: what changed, beyond noise, and whether the prediction held."""

    TITLE = "diag compare"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Static.heading { text-style: bold; margin: 1 0 0 0; }
    Static.warning { color: $warning; }
    DataTable { height: auto; max-height: 16; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit"),
                                             Binding("a", "all_metrics", "All metrics / moved only")]

    def __init__(self, comparison: dict[str, Any], gate: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.comparison = comparison
        self.gate = gate or []
        self.moved_only = True
        self.sub_title = "  vs  ".join(rows.sides_text(comparison))

    def compose(self) -> ComposeResult:
        c = self.comparison
        with VerticalScroll(id="compare"):
            for w in c["warnings"]:
                yield Static(f"warning: {w}", classes="warning")
            yield Static("\n".join(rows.verdict_text(c)), classes="heading", id="verdict")
            yield Static("Throughput & latency", classes="heading")
            yield self._table("figures", rows.FIGURE_HEAD, rows.figure_rows(c))
            yield Static("Key metrics (moved beyond noise; a: all)", classes="heading", id="metrics-heading")
            yield self._table("metrics", rows.METRIC_HEAD, rows.metric_rows(c, moved_only=True))
            yield Static("Predicted (A's diagnosis) vs realised (B)", classes="heading")
            yield self._table("predictions", rows.PREDICTION_HEAD, rows.prediction_rows(c))
            yield Static("Environment", classes="heading")
            yield self._table("environment", rows.ENV_HEAD, rows.environment_rows(c))
            if self.gate:
                yield Static("Budgets", classes="heading")
                yield self._table("budgets", ("budget", "value (95% CI)", ""), rows.gate_rows(self.gate))
        yield Footer()

    def _table(self, name: str, head: tuple[str, ...], body: list[tuple[str, ...]]) -> DataTable:
        t: DataTable = DataTable(id=f"table-{name}", zebra_stripes=True, cursor_type="row")
        t.add_columns(*head)
        self._fill(t, name, body)
        return t

    def _fill(self, t: DataTable, name: str, body: list[tuple[str, ...]]) -> None:
        word = _WORD_COLS.get(name)
        for r in body:
            cells: list[Any] = list(r)
            if word is not None:
                cells[word] = Text(r[word], style=rows.WORD_STYLE.get(r[word], "dim"))
            t.add_row(*cells)

    def action_all_metrics(self) -> None:
        self.moved_only = not self.moved_only
        t = self.query_one("#table-metrics", DataTable)
        t.clear()
        self._fill(t, "metrics", rows.metric_rows(self.comparison, moved_only=self.moved_only))


def make_compare_app(comparison: dict[str, Any], gate: list[dict[str, Any]] | None = None) -> CompareApp:
    return CompareApp(comparison, gate)


def run_compare_tui(comparison: dict[str, Any], gate: list[dict[str, Any]] | None = None) -> int:
    """Open the comparison in the TUI; DiagError without an interactive terminal."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise DiagError("diag compare --tui needs an interactive terminal (the comparison is printed above)")
    app = make_compare_app(comparison, gate)
    app.run()
    return app.return_code or 0
