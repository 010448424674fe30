"""Timeline: every series over the run, one small chart each, phases marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.containers import VerticalScroll
from textual.widgets import Static

from diag.analysis.collectors import missing_data_note
from diag.analysis.series import GROUP_TITLES
from diag.engine.diagnosis import Phase
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.phase_bar import PhaseBar
from diag.tui.widgets.time_chart import TimeChart


@dataclass
class TimelineData:
    series: list[Any]
    phases: list[Phase]
    duration_s: float
    collectors: dict[str, Any]


class TimelineView(View):
    TITLE = "Timeline"
    HELP = "GPU, GPU activity, CPU, memory, copies and latency over the run; phases shaded behind."

    def load(self, source: Source) -> TimelineData:
        d = source.diagnosis()
        return TimelineData(source.timeline(2000), d.phases, source.duration_s,
                            source.manifest.get("collectors") or {})

    def show(self, data: TimelineData) -> None:
        if not any(s.group in ("gpu", "gpm") for s in data.series):
            self.mount(Static(missing_data_note(data.collectors, "gpu"), classes="notice"))
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
