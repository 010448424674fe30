"""The diag TUI: an App over a data source, one tab per view.

`make_app(source)` builds it (tests make one in a line with canned data);
`run_tui(path)` is what `diag tui RUN` calls.
"""

from __future__ import annotations

import sys
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Input, TabbedContent, TabPane

from diag.engine.diagnosis import Diagnosis
from diag.errors import DiagError
from diag.tui.help import HelpScreen
from diag.tui.source import RunSource, Source
from diag.tui.views.base import View
from diag.tui.views.findings import FindingsView
from diag.tui.views.kernels import KernelsView
from diag.tui.views.latency import LatencyView
from diag.tui.views.load import LoadView
from diag.tui.views.overview import OverviewView
from diag.tui.views.run_info import RunView
from diag.tui.views.serving import ServingView
from diag.tui.views.stacks import StacksView
from diag.tui.views.timeline import TimelineView

VIEWS: tuple[type[View], ...] = (OverviewView, FindingsView, TimelineView, LatencyView, StacksView,
                                 KernelsView, RunView, ServingView, LoadView)


def pane_id(view: type[View]) -> str:
    return f"tab-{view.TITLE.lower()}"


class DiagApp(App[int]):
    """Explore one run: its verdict, findings, timeline, latency, stacks, kernels and manifest."""

    CSS_PATH: ClassVar[list[str]] = ["diag.tcss"]
    TITLE = "diag"
    ENABLE_COMMAND_PALETTE = False
    AUTO_FOCUS = None  # views focus their own list once loaded; the hidden filter must never hold focus
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("tab", "switch(1)", "Next view", priority=True),
        Binding("shift+tab", "switch(-1)", "Prev view", priority=True, show=False),
        Binding("escape", "close_filter", "Close filter", show=False),
        # the digits pick a view; the tabs carry no number (nine numbered tabs overflow 80 columns), the
        # footer says "1-9" once
        *[Binding(str(i), f"show_view({i})", "Views" if i == 1 else view.TITLE, show=i == 1,
                  key_display=f"1-{len(VIEWS)}" if i == 1 else None) for i, view in enumerate(VIEWS, 1)],
    ]

    def __init__(self, source: Source) -> None:
        super().__init__()
        self.source = source
        cmd = " ".join(str(c) for c in source.manifest.get("command") or [])
        self.sub_title = cmd

    def compose(self) -> ComposeResult:
        with TabbedContent(id="views"):
            for view in VIEWS:
                with TabPane(view.TITLE, id=pane_id(view)):
                    yield view(self.source, id=f"view-{view.TITLE.lower()}")
        yield Input(placeholder="filter this view's list (enter: keep, esc: clear)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        # Start diagnosing after the first frame is drawn: the worker thread competes for the GIL.
        self.call_after_refresh(self.current_view().ensure_loaded)

    def current_view(self) -> View:
        pane = self.query_one("#views", TabbedContent).active_pane
        assert pane is not None
        return pane.query_one(View)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        view = event.pane.query_one(View)
        view.ensure_loaded()
        filt = self.query_one("#filter", Input)
        if filt.display:
            self.action_close_filter()
        if view.ready:
            view.focus_main()

    def action_show_view(self, number: int) -> None:
        if 1 <= number <= len(VIEWS):
            self.query_one("#views", TabbedContent).active = pane_id(VIEWS[number - 1])

    def action_switch(self, delta: int) -> None:
        tabs = self.query_one("#views", TabbedContent)
        ids = [pane_id(v) for v in VIEWS]
        tabs.active = ids[(ids.index(tabs.active) + delta) % len(ids)]

    def action_help(self) -> None:
        self.push_screen(HelpScreen([(v.TITLE, v.HELP) for v in VIEWS]))

    def action_filter(self) -> None:
        view = self.current_view()
        if view.ready and view.apply_filter(view.filter_text) is not None:
            filt = self.query_one("#filter", Input)
            filt.value = view.filter_text
            filt.display = True
            filt.focus()
        else:
            self.notify(f"Nothing to filter in {view.TITLE}.", timeout=2)

    def on_input_changed(self, event: Input.Changed) -> None:
        view = self.current_view()
        view.filter_text = event.value
        status = view.apply_filter(event.value)
        if status:
            self.query_one("#filter", Input).border_subtitle = status

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.set_focus(None)
        self.current_view().focus_main()

    def action_close_filter(self) -> None:
        filt = self.query_one("#filter", Input)
        if filt.display:
            view = self.current_view()
            view.filter_text = ""
            view.apply_filter("")
            filt.value = ""
            filt.display = False
            self.set_focus(None)
            view.focus_main()


def make_app(source: Source | str, diagnosis: Diagnosis | None = None,
             rule_dirs: tuple[str, ...] = ()) -> DiagApp:
    """The TUI for `source`: a data source, or the path of a run directory or trace (then
    `diagnosis`, when given, is used instead of diagnosing the run again with `rule_dirs`)."""
    if isinstance(source, str):
        source = RunSource.open(source, diagnosis, rule_dirs)
    return DiagApp(source)


def run_tui(path: str, diagnosis: Diagnosis | None = None, rule_dirs: tuple[str, ...] = ()) -> int:
    """Open the TUI on the run at `path`; raises DiagError (one line) on bad input.

    `diag profile --tui` passes the diagnosis it has just printed, so the verdict shows at once.
    """
    app = make_app(path, diagnosis, rule_dirs)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise DiagError("diag tui needs an interactive terminal (try diag analyze RUN instead)")
    app.run()
    return app.return_code or 0
