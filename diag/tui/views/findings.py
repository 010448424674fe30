"""Findings: the list, and for the selected one its evidence and recommendations."""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widgets import Markdown, OptionList, Static
from textual.widgets.option_list import Option

from diag.engine.diagnosis import Diagnosis, Finding
from diag.tui import fmt
from diag.tui.source import Source
from diag.tui.views.base import View

SEVERITY_MARK = {"high": "!!!", "medium": "!! ", "low": "!  ", "info": "·  "}


def finding_markdown(f: Finding) -> str:
    """The detail of one finding as Markdown: evidence table, recommendations, code, gain."""
    lines = [f"## {f.title}", "",
             f"**{f.label or 'note'}** · severity {f.severity} · score {f.score:.2f} · `{f.rule}`", ""]
    if f.evidence:
        lines += ["### Evidence", "", "| metric | value | threshold | unit |", "|---|---:|---|---|"]
        for e in f.evidence:
            lines.append(f"| `{e.metric}` | {fmt.value(e.value, e.unit)} | {e.threshold or '–'} | {e.unit or '–'} |")
        lines.append("")
    if f.recommendations:
        lines += ["### Recommendations", ""]
        for i, r in enumerate(f.recommendations, 1):
            lines.append(f"{i}. {r.text}")
            if r.expected_gain:
                lines.append(f"   *Expected gain:* {r.expected_gain}")
            if r.code:
                lines += ["", "```python", r.code.rstrip(), "```"]
            if r.link:
                lines.append(f"   See {r.link}")
            lines.append("")
    return "\n".join(lines)


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
        self.findings = sorted(data.findings, key=lambda f: -f.score)
        self.shown: list[Finding] = list(self.findings)
        if not self.findings:
            self.mount(Static("No findings: no rule fired on this run.", classes="problem"))
            return
        self.mount(OptionList(id="finding-list"))
        self.mount(VerticalScroll(Markdown(id="finding-detail"), id="finding-scroll", can_focus=False))
        self._fill()

    def _fill(self) -> None:
        options = self.query_one("#finding-list", OptionList)
        options.clear_options()
        options.add_options([Option(f"{SEVERITY_MARK.get(f.severity, '   ')} {f.title}") for f in self.shown])
        if self.shown:
            options.highlighted = 0
        else:
            self.query_one("#finding-detail", Markdown).update("*No finding matches the filter.*")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if 0 <= event.option_index < len(self.shown):
            self.query_one("#finding-detail", Markdown).update(finding_markdown(self.shown[event.option_index]))
            self.query_one("#finding-scroll").scroll_home(animate=False)

    def apply_filter(self, text: str) -> str | None:
        if not getattr(self, "findings", None):
            return None
        self.shown = [f for f in self.findings if matches(f, text)]
        self._fill()
        return f"{len(self.shown)} of {len(self.findings)} findings"
