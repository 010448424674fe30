"""The run's phases on a time line: one coloured segment per phase, then an axis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from diag.analysis.units import format_value
from diag.engine.diagnosis import Phase

PHASE_CLASSES = ("startup", "warmup", "steady")


def phase_at(phases: Sequence[Phase], t: float) -> str | None:
    """The name of the phase holding time `t` (seconds), if any."""
    for p in phases:
        if p.start_s <= t < p.end_s:
            return p.name
    return None


def column_phases(phases: Sequence[Phase], duration_s: float, width: int) -> list[str | None]:
    """The phase under each of `width` columns spanning [0, duration_s]."""
    if width <= 0 or duration_s <= 0:
        return [None] * max(0, width)
    step = duration_s / width
    cols = [phase_at(phases, (i + 0.5) * step) for i in range(width)]
    # A phase shorter than a column (a 4 s startup in an hour) still gets the column it starts in.
    for p in phases:
        if p.name not in cols and p.end_s > p.start_s:
            cols[min(width - 1, max(0, int(p.start_s / step)))] = p.name
    return cols


class PhaseBar(Widget):
    """Two lines: the phases as segments labelled with their names, and a time axis."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"phase--{p}" for p in PHASE_CLASSES} | {"phase--other", "phase--axis"}

    def __init__(self, phases: Sequence[Phase], duration_s: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.phases = list(phases)
        self.duration_s = duration_s

    def get_content_height(self, container, viewport, width: int) -> int:  # noqa: ANN001
        return 2

    def phase_style(self, name: str | None) -> Style:
        if name is None:
            return Style()
        key = name if name in PHASE_CLASSES else "other"
        return self.get_component_rich_style(f"phase--{key}")

    def render(self) -> Text:
        width = self.size.width
        cols = column_phases(self.phases, self.duration_s, width)
        text = Text(no_wrap=True, overflow="crop")
        i = 0
        while i < width:
            j = i
            while j < width and cols[j] == cols[i]:
                j += 1
            name = cols[i] or ""
            label = name[: j - i].center(j - i) if name else " " * (j - i)
            text.append(label, style=self.phase_style(cols[i]))
            i = j
        text.append("\n")
        text.append(axis(self.duration_s, width), style=self.get_component_rich_style("phase--axis"))
        return text


def axis(duration_s: float, width: int) -> str:
    """A time axis: the start, the middle and the end of the run in seconds."""
    left, mid, right = "0 s", format_value(duration_s / 2, "s"), format_value(duration_s, "s")
    if width < len(left) + len(right) + 2:
        return left[:width]
    line = left + " " * (width - len(left) - len(right)) + right
    m = width // 2 - len(mid) // 2
    if width >= len(left) + len(mid) + len(right) + 6:
        line = line[:m] + mid + line[m + len(mid):]
    return line
