"""Steps and requests: latency percentiles, a histogram, the slowest ones, queue wait vs service."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from textual.containers import VerticalScroll
from textual.widgets import Static

from diag.analysis.latency import SCOPE
from diag.analysis.units import format_value
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.frame_table import FrameTable
from diag.tui.widgets.histogram import Histogram


@dataclass
class LatencyData:
    summary: pd.DataFrame
    values_ms: dict[str, np.ndarray]
    slowest: dict[str, pd.DataFrame]
    queue: pd.DataFrame


def queue_line(queue: pd.DataFrame) -> str:
    """Median and p95 of queue wait and service time over the requests that have both."""
    q = queue.dropna(subset=["queue_ms"]) if "queue_ms" in queue else queue.iloc[0:0]
    if q.empty:
        return "No request had a step inside it: queue wait cannot be split from service."
    parts = []
    for col, name in (("queue_ms", "queue wait"), ("service_ms", "service")):
        v = q[col].to_numpy(dtype=float)
        parts.append(f"{name} p50 {format_value(np.percentile(v, 50), 'ms')}, "
                     f"p95 {format_value(np.percentile(v, 95), 'ms')}")
    share = float(q["queue_ms"].sum() / max(q["latency_ms"].sum(), 1e-12))
    return (f"{format_value(len(q), 'count')} requests · " + " · ".join(parts)
            + f" · queue is {format_value(share, 'ratio')} of latency")


class LatencyView(View):
    TITLE = "Latency"
    HELP = "Steps (outermost model calls) and requests: p50/p90/p95/p99, histogram, slowest, queue vs service."

    def load(self, source: Source) -> LatencyData:
        summary = source.latency_summary()
        kinds = list(summary["kind"]) if not summary.empty else []
        return LatencyData(summary, {k: np.asarray(source.latency_values(k)) for k in kinds},
                           {k: source.slowest(k, 20) for k in kinds}, source.queue_vs_service())

    def show(self, data: LatencyData) -> None:
        if data.summary.empty:
            self.mount(Static("No steps or requests were recorded: no model call was seen.", classes="problem"))
            return
        body = VerticalScroll(id="latency-body")
        self.mount(body)
        body.mount(Static(f"Latency — {SCOPE}", classes="section"))
        body.mount(FrameTable(data.summary, id="latency-summary", classes="fit"))
        if "request" in data.values_ms:
            body.mount(Static("Queue wait vs service (whole run)", classes="section"))
            body.mount(Static(queue_line(data.queue)))
        for kind, values in data.values_ms.items():
            body.mount(Static(f"{kind.capitalize()} latency histogram (steady state)", classes="section"))
            body.mount(Histogram(values / 1e3))
        for kind, df in data.slowest.items():
            body.mount(Static(f"Slowest {kind}s (whole run)", classes="section"))
            body.mount(FrameTable(df, classes="fit slowest"))

    def apply_filter(self, text: str) -> str | None:
        tables = list(self.query(".slowest").results(FrameTable))
        if not tables:
            return None
        shown = sum(t.apply_filter(text) for t in tables)
        return f"{shown} slowest rows match"
