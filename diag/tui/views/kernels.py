"""Kernels: top kernels, kernel categories and memcpy kinds from the kernel windows."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from diag.analysis.collectors import missing_data_note
from diag.analysis.units import format_value
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.frame_table import FrameTable
from diag.tui.widgets.score_bars import share_lines


@dataclass
class KernelsData:
    top: pd.DataFrame
    categories: pd.DataFrame
    memcpy: pd.DataFrame
    note: str  # why there are no kernels, shown when there are none


def categories_text(categories: pd.DataFrame, width: int = 24) -> Text:
    """One line per kernel category: name, bar of its share of GPU time, share, total."""
    rows = [(str(r.category), float(r.share), f"  {format_value(r.total_ms, 'ms'):>9}  {format_value(r.count, 'count')}")
            for r in categories.itertuples(index=False)]
    return share_lines(rows, 12, width)


class KernelsView(View):
    TITLE = "Kernels"
    HELP = "GPU kernels seen in the short profiler windows: top kernels, categories, memcpy kinds. / filters."

    def load(self, source: Source) -> KernelsData:
        return KernelsData(source.kernel_summary(30), source.kernel_categories(), source.memcpy_kinds(),
                           missing_data_note(source.manifest.get("collectors") or {}, "kernels"))

    def show(self, data: KernelsData) -> None:
        if data.top.empty and data.categories.empty:
            self.mount(Static(Text(data.note), classes="notice"))
            return
        body = VerticalScroll(id="kernels-body")
        self.mount(body)
        body.mount(Static("Top kernels", classes="section"))
        # Kernel names are long: clip them so the numbers still fit at 80 columns.
        body.mount(FrameTable(data.top, id="kernel-top", classes="fit", max_cell=max(24, self.size.width - 50)))
        body.mount(Static(id="kernel-name", classes="full-name"))
        body.mount(Static("Categories (share of GPU time in the windows)", classes="section"))
        body.mount(Static(categories_text(data.categories)))
        body.mount(Static("Memory copies", classes="section"))
        if data.memcpy.empty:
            body.mount(Static("no memcpy in the kernel windows"))
        else:
            body.mount(FrameTable(data.memcpy, classes="fit"))

    def apply_filter(self, text: str) -> str | None:
        tables = list(self.query("#kernel-top").results(FrameTable))
        return f"{tables[0].apply_filter(text)} kernels match" if tables else None

    def on_data_table_row_highlighted(self, event: FrameTable.RowHighlighted) -> None:
        # The table clips long names; the highlighted kernel's full name shows under it.
        if event.data_table.id == "kernel-top" and isinstance(event.data_table, FrameTable):
            row = event.data_table.shown_row(event.cursor_row)
            self.query_one("#kernel-name", Static).update(Text(str(row[0]) if row else ""))
