"""Load: what the load diag drove found (diag load, diag profile --load): client and server
percentiles in one table, SLOs, requests/s and requests in flight over time, and a sweep's table."""

from __future__ import annotations

import pandas as pd
from textual.containers import VerticalScroll
from textual.widgets import Sparkline, Static

from diag.analysis.units import format_value
from diag.engine.diagnosis import Diagnosis
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.frame_table import FrameTable
from diag.views import load as load_view


class LoadView(View):
    TITLE = "Load"
    HELP = ("The load diag drove: client latency beside the server's own timing of the same requests (the "
            "time before the handler only the client sees), SLOs, requests/s and in flight over time, a sweep.")

    def load(self, source: Source) -> Diagnosis:
        return source.diagnosis()

    def show(self, d: Diagnosis) -> None:
        body = VerticalScroll(id="load-body")
        self.mount(body)
        if not d.load:
            body.mount(Static("No load in this run: drive one with diag load URL, or diag profile --load 'URL ...'."))
            return
        body.mount(Static(load_view.headline(d)))
        rows = load_view.side_rows(d)
        if rows:
            body.mount(Static("Client and server, measured load", classes="section"))
            body.mount(FrameTable(pd.DataFrame(rows, columns=["side", *load_view.SIDE_HEADERS[1:]]), classes="fit"))
        slos = load_view.slo_lines(d)
        if slos:
            body.mount(Static("\n".join(slos)))
        s = load_view.series(d)
        for key, name in (("done_per_s", "answered requests/s"), ("in_flight", "requests in flight")):
            values = s.get(key) or []
            if values:
                body.mount(Static(f"{name} over the load (peak {format_value(max(values), 'count')})",
                                  classes="section"))
                body.mount(Sparkline(values, summary_function=max))
        srows = load_view.sweep_rows(d)
        if srows:
            body.mount(Static("Sweep: latency vs offered load", classes="section"))
            body.mount(FrameTable(pd.DataFrame(srows, columns=list(load_view.SWEEP_HEADERS)), classes="fit"))
            body.mount(Static(load_view.sweep_line(d)))
