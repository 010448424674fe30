"""Stacks: the hottest Python frames by phase, inside vs outside the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from diag.analysis.collectors import missing_data_note
from diag.analysis.tables import time_breakdown
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.frame_table import FrameTable
from diag.tui.widgets.score_bars import share_lines

ALL = "all phases"


def short_frame(text: str, cwd: str = "") -> str:
    """A stack frame 'fn (/long/path/site-packages/torch/x.py:12)' with its path shortened:
    relative to the package root or the run's working directory."""
    if "(" not in text or not text.endswith(")"):
        return text
    fn, _, where = text[:-1].rpartition(" (")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            where = where.rsplit(marker, 1)[1]
            break
    else:
        if cwd and where.startswith(cwd.rstrip("/") + "/"):
            where = where[len(cwd.rstrip("/")) + 1:]
    return f"{fn} ({where})"


@dataclass
class StacksData:
    frames: pd.DataFrame
    breakdown: pd.DataFrame
    note: str  # why there are no frames, shown when there are none
    phase_order: list[str]


def breakdown_text(breakdown: pd.DataFrame, width: int = 24) -> Text:
    """One line per part of the steady state's time: name, bar, share."""
    rows = [(str(r.part), float(r.share), "") for r in breakdown.itertuples(index=False)]
    return share_lines(rows, 19, width)


class StacksView(View):
    TITLE = "Stacks"
    HELP = "Hottest leaf frames from py-spy samples, per phase, and whether each ran inside the model. p: next phase."

    BINDINGS: ClassVar[list[BindingType]] = [Binding("p", "next_phase", "Phase")]

    def load(self, source: Source) -> StacksData:
        d = source.diagnosis()
        return StacksData(source.hot_frames(d.phases, 30), time_breakdown(d.metrics),
                          missing_data_note(source.manifest.get("collectors") or {}, "stacks"),
                          [p.name for p in d.phases])

    def show(self, data: StacksData) -> None:
        self.data = data
        if not data.breakdown.empty:
            self.mount(Static("Steady-state time", classes="section"))
            self.mount(Static(breakdown_text(data.breakdown), id="breakdown"))
        if data.frames.empty:
            self.mount(Static(Text(data.note), classes="problem"))
            return
        present = set(data.frames["phase"])
        order = [p for p in data.phase_order if p in present] + sorted(present - set(data.phase_order))
        self.phases = [ALL, *order]
        self.phase = "steady" if "steady" in self.phases else ALL
        self.mount(Static(id="phase-title", classes="section"))
        self.mount(FrameTable(id="frames", max_cell=max(24, self.size.width - 40)))
        self.mount(Static(id="frame-name", classes="full-name"))
        self._fill()

    def _fill(self) -> None:
        df = self.data.frames
        if self.phase != ALL:
            df = df[df["phase"] == self.phase]
        df = df.sort_values("self_s", ascending=False)
        table = self.query_one("#frames", FrameTable)
        cwd = str(self.source.manifest.get("cwd") or "")
        table.set_frame(df.assign(where=df["in_model"].map({True: "model", False: "outside"}),
                                  frame=df["frame"].map(lambda f: short_frame(str(f), cwd))),
                        ["frame", "where", "self_s", "share", "phase"])
        if self.filter_text:
            table.apply_filter(self.filter_text)
        self.query_one("#phase-title", Static).update(f"Hottest frames · {self.phase} (p: next phase)")

    def action_next_phase(self) -> None:
        if getattr(self, "phases", None):
            self.phase = self.phases[(self.phases.index(self.phase) + 1) % len(self.phases)]
            self._fill()

    def apply_filter(self, text: str) -> str | None:
        self.filter_text = text
        tables = list(self.query("#frames").results(FrameTable))
        return f"{tables[0].apply_filter(text)} frames match" if tables else None

    def on_data_table_row_highlighted(self, event: FrameTable.RowHighlighted) -> None:
        # Long frames are clipped in the table; the highlighted one shows in full under it.
        if event.data_table.id == "frames" and isinstance(event.data_table, FrameTable):
            row = event.data_table.shown_row(event.cursor_row)
            self.query_one("#frame-name", Static).update(Text(str(row[0]) if row else ""))
