"""Overview: the verdict, a bar per label score, key steady-state metrics, the phases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from diag.engine.diagnosis import Diagnosis
from diag.tui import fmt
from diag.tui.labels import MEANING
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.phase_bar import PhaseBar
from diag.tui.widgets.score_bars import ScoreBars

MAX_METRICS = 12


@dataclass
class OverviewData:
    diagnosis: Diagnosis
    manifest: dict[str, Any]
    duration_s: float


def key_metrics(diagnosis: Diagnosis, limit: int = MAX_METRICS) -> list[tuple[str, str]]:
    """(name, formatted value) of the steady-state metrics, or of any metrics if none are steady."""
    items = [(k, v) for k, v in diagnosis.metrics.items() if k.startswith("steady.")]
    if not items:
        items = list(diagnosis.metrics.items())
    return [(k.removeprefix("steady."), fmt.value(v, diagnosis.units.get(k, ""))) for k, v in items[:limit]]


def run_line(manifest: dict[str, Any], duration_s: float) -> str:
    """'python serve.py · 60.0 s · NVIDIA H200 · exit 0'."""
    cmd = " ".join(str(c) for c in manifest.get("command") or []) or "?"
    devices = (manifest.get("gpu") or {}).get("devices") or []
    gpu = devices[0].get("name", "GPU") if devices else "no GPU"
    parts = [cmd, fmt.seconds(duration_s), gpu]
    if manifest.get("exit_code") is not None:
        parts.append(f"exit {manifest['exit_code']}")
    return " · ".join(parts)


class OverviewView(View):
    TITLE = "Overview"
    HELP = "The verdict, the score of every label, key steady-state metrics, and the run's phases."

    def load(self, source: Source) -> OverviewData:
        return OverviewData(source.diagnosis(), source.manifest, source.duration_s)

    def show(self, data: OverviewData) -> None:
        d = data.diagnosis
        if d.primary:
            verdict = f"{d.primary}  —  {MEANING.get(d.primary, '')}"
        else:
            verdict = "No verdict  —  " + next((f.title for f in d.findings if f.label is None),
                                                 "too little evidence in this run")
        self.mount(Static(verdict, id="verdict", classes=f"label-{d.primary or 'none'}"))
        line = run_line(data.manifest, data.duration_s)
        if data.manifest.get("partial"):
            line += " · PARTIAL RUN (recording cut short)"
        self.mount(Static(line, id="run-line"))
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
