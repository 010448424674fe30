"""One time series as a small bar chart across the run, phases tinted behind it.

Every chart spans the whole run [0, duration], so charts stacked in a column
line up in time with each other and with the PhaseBar above them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from diag.analysis.units import format_value
from diag.engine.diagnosis import Phase
from diag.tui.widgets.phase_bar import PHASE_CLASSES, column_phases

BLOCKS = " ▁▂▃▄▅▆▇█"


def bin_columns(t_s: np.ndarray, values: np.ndarray, duration_s: float, width: int) -> np.ndarray:
    """The largest value in each of `width` equal time columns over [0, duration_s]; NaN where none."""
    out = np.full(width, np.nan)
    if width <= 0 or duration_s <= 0 or len(t_s) == 0:
        return out
    t = np.asarray(t_s, dtype=float)
    v = np.asarray(values, dtype=float)
    keep = np.isfinite(t) & np.isfinite(v)
    idx = np.clip((t[keep] / duration_s * width).astype(int), 0, width - 1)
    np.fmax.at(out, idx, v[keep])
    if keep.sum() > 1:
        # Columns narrower than the sampling interval fall between samples: carry the last
        # value across such gaps, but leave real holes (no samples for a while) empty.
        spacing = float(np.median(np.diff(np.sort(t[keep]))))
        _carry(out, max(1, int(np.ceil(spacing / duration_s * width))))
    return out


def _carry(columns: np.ndarray, max_gap: int) -> None:
    """Fill runs of at most `max_gap` NaN columns between two values with the value before them."""
    last = -1
    for x in range(len(columns)):
        if np.isnan(columns[x]):
            continue
        if last >= 0 and 1 < x - last <= max_gap + 1:
            columns[last + 1:x] = columns[last]
        last = x


def chart_rows(columns: np.ndarray, top: float, height: int) -> list[str]:
    """Block characters for `columns` scaled to [0, top], `height` rows, top row first."""
    levels = height * 8
    rows = [[" "] * len(columns) for _ in range(height)]
    for x, v in enumerate(columns):
        if not np.isfinite(v) or top <= 0:
            continue
        n = int(round(min(1.0, max(0.0, v / top)) * levels))
        if v > 0 and n == 0:
            n = 1  # a non-zero value always shows
        for r in range(height):
            fill = min(8, max(0, n - 8 * r))
            rows[height - 1 - r][x] = BLOCKS[fill]
    return ["".join(r) for r in rows]


def scale_top(unit: str, values: np.ndarray) -> float:
    """The value at the top of the chart: 100 for percentages, else the largest value."""
    finite = values[np.isfinite(values)] if len(values) else values
    peak = float(finite.max()) if len(finite) else 0.0
    if unit in ("%", "percent") and peak <= 100:
        return 100.0
    return peak


class TimeChart(Widget):
    """A title line (name, unit, mean and peak), then `rows` lines of bars."""

    COMPONENT_CLASSES: ClassVar[set[str]] = (
        {f"chart--{p}" for p in PHASE_CLASSES} | {"chart--bars", "chart--title", "chart--stats"}
    )

    def __init__(self, series: Any, duration_s: float, phases: Sequence[Phase], rows: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series = series
        self.duration_s = duration_s
        self.phases = list(phases)
        self.rows = rows
        values = np.asarray(series.values, dtype=float)
        finite = values[np.isfinite(values)]
        self.mean = float(finite.mean()) if len(finite) else float("nan")
        self.peak = float(finite.max()) if len(finite) else float("nan")
        self.top = scale_top(series.unit, values)

    def get_content_height(self, container, viewport, width: int) -> int:  # noqa: ANN001
        return 1 + self.rows

    def render(self) -> Text:
        width = self.size.width
        s = self.series
        text = Text(no_wrap=True, overflow="crop")
        text.append(s.name, style=self.get_component_rich_style("chart--title"))
        stats = f"  mean {format_value(self.mean, s.unit)}  peak {format_value(self.peak, s.unit)}"
        text.append(stats, style=self.get_component_rich_style("chart--stats"))
        columns = bin_columns(s.t_s, s.values, self.duration_s, width)
        phases = column_phases(self.phases, self.duration_s, width)
        bars = self.get_component_rich_style("chart--bars")
        tints: dict[str | None, Style] = {None: bars}
        for p in PHASE_CLASSES:
            tints[p] = bars + Style(bgcolor=self.get_component_rich_style(f"chart--{p}").bgcolor)
        for row in chart_rows(columns, self.top, self.rows):
            text.append("\n")
            start = 0
            for x in range(1, width + 1):
                if x == width or phases[x] != phases[start]:
                    text.append(row[start:x], style=tints.get(phases[start], bars))
                    start = x
        return text
