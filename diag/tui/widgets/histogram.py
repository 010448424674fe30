"""A latency histogram drawn sideways: one line per bin, bars scaled to the width."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from rich.text import Text
from textual.widget import Widget

from diag.analysis.units import format_value
from diag.tui.widgets.score_bars import bar


def histogram_bins(values_s: np.ndarray, bins: int = 10) -> list[tuple[float, float, int]]:
    """(low, high, count) per bin over p0..p99 of the values, the tail folded into the last bin."""
    v = np.asarray(values_s, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return []
    lo, hi = float(v.min()), float(np.percentile(v, 99))
    if hi <= lo:
        return [(lo, float(v.max()), int(len(v)))]
    edges = np.linspace(lo, hi, bins + 1)
    counts, _ = np.histogram(np.clip(v, lo, hi), bins=edges)
    out = [(float(edges[i]), float(edges[i + 1]), int(counts[i])) for i in range(bins)]
    if v.max() > hi:
        out[-1] = (out[-1][0], float(v.max()), out[-1][2])  # the last bin holds the tail
    return out


class Histogram(Widget):
    """Latency histogram of values in seconds."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"histogram--bar"}

    def __init__(self, values_s: np.ndarray, bins: int = 10, **kwargs) -> None:
        super().__init__(**kwargs)
        self.bins = histogram_bins(values_s, bins)

    def get_content_height(self, container, viewport, width: int) -> int:  # noqa: ANN001
        return max(1, len(self.bins))

    def render(self) -> Text:
        if not self.bins:
            return Text("no values")
        labels = [f"{format_value(lo, 's')} – {format_value(hi, 's')}" for lo, hi, _ in self.bins]
        counts = [format_value(c, "count") for _, _, c in self.bins]
        lw, cw = max(map(len, labels)), max(map(len, counts))
        bar_w = max(4, self.size.width - lw - cw - 3)
        peak = max(c for _, _, c in self.bins) or 1
        style = self.get_component_rich_style("histogram--bar")
        text = Text(no_wrap=True, overflow="crop")
        for i, ((_, _, c), label, count) in enumerate(zip(self.bins, labels, counts, strict=True)):
            text.append(f"{label:>{lw}} ")
            text.append(bar(c / peak, bar_w), style=style)
            text.append(f" {count:>{cw}}")
            if i < len(self.bins) - 1:
                text.append("\n")
        return text
