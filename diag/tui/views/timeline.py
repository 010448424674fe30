"""Timeline: every series over the run, one small chart each, phases marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.containers import VerticalScroll
from textual.widgets import Static

from diag.engine.diagnosis import Phase
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.phase_bar import PhaseBar
from diag.tui.widgets.time_chart import TimeChart

GROUP_TITLES = {"gpu": "GPU", "gpm": "GPU activity (GPM)", "cpu": "CPU", "memory": "Memory", "io": "I/O",
                "copies": "Copies", "latency": "Latency"}


@dataclass
class TimelineData:
    series: list[Any]
    phases: list[Phase]
    duration_s: float
    collectors: dict[str, Any]


def collector_note(collectors: dict[str, Any], name: str, what: str) -> str | None:
    """Why there is no data from collector `name`, from the manifest; None when it ran."""
    c = collectors.get(name) or {"status": "missing", "reason": "not recorded"}
    if c.get("status") == "ok":
        return None
    reason = c.get("reason") or "no reason recorded"
    return f"No {what}: the {name} collector was {c.get('status', '?')} — {reason}"


class TimelineView(View):
    TITLE = "Timeline"
    HELP = "GPU, GPU activity, CPU, memory, copies and latency over the run; phases shaded behind."

    def load(self, source: Source) -> TimelineData:
        d = source.diagnosis()
        return TimelineData(source.timeline(2000), d.phases, source.duration_s,
                            source.manifest.get("collectors") or {})

    def show(self, data: TimelineData) -> None:
        gpu_note = collector_note(data.collectors, "gpu", "GPU charts")
        has_gpu = any(s.group in ("gpu", "gpm") for s in data.series)
        if gpu_note and not has_gpu:
            self.mount(Static(gpu_note, classes="notice"))
        if not data.series:
            self.mount(Static("Nothing was sampled over time in this run.", classes="problem"))
            return
        self.mount(PhaseBar(data.phases, data.duration_s, id="timeline-phases"))
        charts = VerticalScroll(id="charts")
        self.mount(charts)
        group = None
        for s in data.series:
            if s.group != group:
                group = s.group
                charts.mount(Static(GROUP_TITLES.get(group, group), classes="section"))
            charts.mount(TimeChart(s, data.duration_s, data.phases))

    def focus_main(self) -> None:
        for charts in self.query("#charts"):
            charts.focus()
