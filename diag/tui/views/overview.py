"""Overview: the verdict, a bar per label score, key steady-state metrics, the phases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from diag.analysis import tables
from diag.analysis.units import format_value
from diag.engine.diagnosis import LABEL_MEANING, Diagnosis
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.phase_bar import PhaseBar
from diag.tui.widgets.score_bars import ScoreBars
from diag.views import ranks as ranks_view
from diag.views.margin import margin_text

MAX_METRICS = 12


@dataclass
class OverviewData:
    diagnosis: Diagnosis
    manifest: dict[str, Any]
    duration_s: float


def key_metrics(diagnosis: Diagnosis, limit: int = MAX_METRICS) -> list[tuple[str, str]]:
    """(name, formatted value) of the key steady-state metrics the diagnosis holds."""
    return [(k.removeprefix("steady."), format_value(v, diagnosis.units.get(k, "")))
            for k, v in tables.key_metrics(diagnosis.metrics)[:limit]]


def run_line(manifest: dict[str, Any]) -> str:
    """'python serve.py · 60.0 s · NVIDIA H200 · exit 0', from the manifest alone (no table read)."""
    cmd = " ".join(str(c) for c in manifest.get("command") or []) or "?"
    devices = (manifest.get("gpu") or {}).get("devices") or []
    parts = [cmd]
    if manifest.get("duration_s") is not None:
        parts.append(format_value(manifest["duration_s"], "s"))
    parts.append(devices[0].get("name", "GPU") if devices else "no GPU")
    if manifest.get("exit_code") is not None:
        parts.append(f"exit {manifest['exit_code']}")
    line = " · ".join(parts)
    if manifest.get("partial"):
        line += " · PARTIAL RUN (recording cut short)"
    return line


class OverviewView(View):
    TITLE = "Overview"
    HELP = "The verdict, the score of every label, key steady-state metrics, and the run's phases."

    def compose(self):  # noqa: ANN201
        # The manifest is already in memory: paint the run at once, the verdict when diagnose() is done.
        yield Static("Diagnosing…", id="verdict", classes="label-pending")
        yield Static(Text(run_line(self.source.manifest)), id="run-line")  # Text: argv is no markup
        yield from super().compose()

    def load(self, source: Source) -> OverviewData:
        return OverviewData(source.diagnosis(), source.manifest, source.duration_s)

    def show(self, data: OverviewData) -> None:
        d = data.diagnosis
        if d.primary:
            verdict = f"{d.primary}  —  {LABEL_MEANING.get(d.primary, '')}"
            if margin_text(d):
                verdict += f"\n{margin_text(d)}"
        else:
            verdict = "No verdict  —  " + d.no_verdict_reason()
        banner = self.query_one("#verdict", Static)
        banner.update(verdict)
        banner.set_classes(f"label-{d.primary or 'none'}")
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        table.add_column(justify="right", no_wrap=True)
        for name, value in key_metrics(d):
            table.add_row(name, value)
        self.mount(Horizontal(
            Vertical(Static("Label scores", classes="section"), ScoreBars(d.scores, d.primary), id="scores"),
            VerticalScroll(Static("Steady state", classes="section"),
                           Static(table if table.row_count else "no metrics"), id="metrics"),
            id="overview-middle",
        ))
        self.mount(Static("Phases", classes="section"))
        self.mount(PhaseBar(d.phases, data.duration_s) if d.phases else Static("no phases found"))
        rank_lines = ranks_view.lines(d)  # a multi-rank job: each rank judged on its own, then the job
        if rank_lines:
            self.mount(Static("Ranks", classes="section"))
            self.mount(Static(Text("\n".join(rank_lines[1:]))))
