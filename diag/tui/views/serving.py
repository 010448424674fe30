"""Serving: request time by measured part and by stage, threads by role (CPU, hot frame), workers."""

from __future__ import annotations

import pandas as pd
from textual.containers import VerticalScroll
from textual.widgets import Static

from diag.analysis.units import format_value
from diag.engine.diagnosis import Diagnosis
from diag.tui.source import Source
from diag.tui.views.base import View
from diag.tui.widgets.frame_table import FrameTable
from diag.views import serving


class ServingView(View):
    TITLE = "Serving"
    HELP = ("Requests of a server: time before the handler, to the model, in the model and after; "
            "diag.stage()/NVTX stages; threads by role with CPU and hot frame; workers judged on their own.")

    def load(self, source: Source) -> Diagnosis:
        return source.diagnosis()

    def show(self, d: Diagnosis) -> None:
        body = VerticalScroll(id="serving-body")
        self.mount(body)
        if not d.serving:
            text = serving.not_judged_text(d, "queueing")
            body.mount(Static(f"No requests seen: queueing {text}" if text else
                              "No server parts in this diagnosis: no request parts, stages or thread roles."))
            return
        parts = d.serving.get("parts") or []
        body.mount(Static("Request time by measured part (steady state)", classes="section"))
        body.mount(Static("\n".join(f"{p['words']:<20} {format_value(p['share'], 'ratio'):>7}  "
                                    f"{format_value(p['mean_ms'], 'ms')} mean" for p in parts)
                          or "No request found by the server hooks: parts are not measured."))
        stages = d.serving.get("stages") or []
        if stages:
            body.mount(Static("Stages inside requests (diag.stage / NVTX)", classes="section"))
            body.mount(Static("\n".join(f"{s['stage']:<20} {format_value(s['share'], 'ratio'):>7}  "
                                        f"{format_value(s['mean_ms'], 'ms')} mean, {s['count']:.0f} calls"
                                        for s in stages)))
        threads = d.serving.get("threads") or []
        if threads:
            body.mount(Static("Threads by role", classes="section"))
            rows = [{"role": t["role"], "thread": t.get("thread") or str(t["tid"]), "pid": t["pid"],
                     "cpu": format_value(t.get("cpu_cores"), "cores"), "hot frame": t.get("hot_frame") or "",
                     "of samples": format_value(t.get("hot_share"), "ratio")} for t in threads]
            body.mount(FrameTable(pd.DataFrame(rows), classes="fit"))
        members = serving.member_lines(d)
        if members:
            body.mount(Static("Workers, each judged on its own", classes="section"))
            body.mount(Static("\n".join(members)))
