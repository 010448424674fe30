"""Findings: the list, and for the selected one its evidence and recommendations."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from diag.analysis.units import format_value
from diag.engine.diagnosis import Diagnosis, Finding
from diag.tui.source import Source
from diag.tui.views.base import View

SEVERITY_MARK = {"high": "!!!", "medium": "!! ", "low": "!  ", "info": "·  "}


def finding_detail(f: Finding) -> Group:
    """The detail of one finding as Rich renderables: compact at 80 columns, code highlighted."""
    parts: list[Any] = [Text(f.title, style="bold"),
                        Text(f"{f.label or 'note'} · severity {f.severity} · score {f.score:.2f} · {f.rule}",
                             style="dim")]
    if f.evidence:
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), expand=True, title="Evidence", title_justify="left",
                      title_style="bold")
        table.add_column("metric", ratio=1, overflow="fold")
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("threshold", no_wrap=True)
        table.add_column("unit", no_wrap=True)
        for e in f.evidence:
            table.add_row(e.metric, format_value(e.value, e.unit), e.threshold or "–", e.unit or "–")
        parts.append(table)
    if f.recommendations:
        parts.append(Text("Recommendations", style="bold"))
        for i, r in enumerate(f.recommendations, 1):
            parts.append(Text(f"{i}. {r.text}"))
            if r.code:
                parts.append(Padding(Syntax(r.code.rstrip(), "python", theme="ansi_dark", word_wrap=True,
                                            background_color="default"), (0, 0, 0, 3)))
            if r.expected_gain:
                parts.append(Text(f"   Expected gain: {r.expected_gain}", style="bold green"))
            if r.link:
                parts.append(Text(f"   See {r.link}", style="dim"))
    return Group(*parts)


def matches(f: Finding, text: str) -> bool:
    """Whether the filter `text` appears in the finding's title, rule, label or severity."""
    t = text.lower()
    return any(t in (s or "").lower() for s in (f.title, f.rule, f.label, f.severity))


class FindingsView(View):
    TITLE = "Findings"
    HELP = "Every finding; the selected one's evidence, recommendations and expected gain. / filters."

    def load(self, source: Source) -> Diagnosis:
        return source.diagnosis()

    def show(self, data: Diagnosis) -> None:
        self.findings = list(data.findings)  # the engine's order: the primary label's finding first
        self.shown: list[Finding] = list(self.findings)
        if not self.findings:
            self.mount(Static("No findings: no rule fired on this run.", classes="problem"))
            return
        self.mount(OptionList(id="finding-list"))
        self.mount(VerticalScroll(Static(id="finding-detail"), id="finding-scroll", can_focus=False))
        self._fill()

    def _fill(self) -> None:
        options = self.query_one("#finding-list", OptionList)
        options.clear_options()
        options.add_options([Option(Text(f"{SEVERITY_MARK.get(f.severity, '   ')} {f.title}")) for f in self.shown])
        if self.shown:
            options.highlighted = 0
        else:
            self.query_one("#finding-detail", Static).update("No finding matches the filter.")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if 0 <= event.option_index < len(self.shown):
            self.query_one("#finding-detail", Static).update(finding_detail(self.shown[event.option_index]))
            self.query_one("#finding-scroll").scroll_home(animate=False)

    def apply_filter(self, text: str) -> str | None:
        if not getattr(self, "findings", None):
            return None
        self.shown = [f for f in self.findings if matches(f, text)]
        self._fill()
        return f"{len(self.shown)} of {len(self.findings)} findings"
