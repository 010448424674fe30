"""A bar per diagnosis label score, scaled to the widget's width."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.widget import Widget

from diag.analysis.units import format_value
from diag.engine.diagnosis import LABELS


def bar(fraction: float, width: int) -> str:
    """A left-aligned bar of `width` cells filled to `fraction`, in eighths of a cell."""
    fraction = min(1.0, max(0.0, fraction))
    filled = fraction * width
    full = int(filled)
    part = "▏▎▍▌▋▊▉"[int((filled - full) * 7)] if full < width and filled - full >= 1 / 8 else ""
    return ("█" * full + part).ljust(width)


def share_lines(rows: list[tuple[str, float, str]], label_width: int, width: int = 24) -> Text:
    """One line per (label, share, trailing text): the label, a bar of the share, the share in %."""
    text = Text(no_wrap=True, overflow="crop")
    for i, (label, share, tail) in enumerate(rows):
        text.append(f"{label:<{label_width}} ")
        text.append(bar(share, width), style="bold")
        text.append(f" {format_value(share, 'ratio'):>6}{tail}")
        if i < len(rows) - 1:
            text.append("\n")
    return text


class ScoreBars(Widget):
    """One line per label: name, a bar for its score in [0, 1], the score."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"score-bars--bar", "score-bars--primary"}

    def __init__(self, scores: dict[str, float], primary: str | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scores = scores
        self.primary = primary

    def _labels(self) -> list[str]:
        return list(LABELS) + [k for k in self.scores if k not in LABELS]

    def get_content_height(self, container, viewport, width: int) -> int:  # noqa: ANN001
        return len(self._labels())

    def render(self) -> Text:
        labels = self._labels()
        name_w = max(len(k) for k in labels)
        bar_w = max(4, self.size.width - name_w - 6)
        normal = self.get_component_rich_style("score-bars--bar")
        primary = self.get_component_rich_style("score-bars--primary")
        text = Text(no_wrap=True, overflow="crop")
        for i, label in enumerate(labels):
            score = float(self.scores.get(label) or 0.0)
            is_primary = label == self.primary
            text.append(f"{label:<{name_w}} ", style="bold" if is_primary else "")
            text.append(bar(score, bar_w), style=primary if is_primary else normal)
            text.append(f" {score:4.2f}", style="bold" if is_primary else "")
            if i < len(labels) - 1:
                text.append("\n")
        return text
