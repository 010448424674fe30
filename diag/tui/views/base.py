"""What every view shares: load its data off the UI thread once, then show it.

A view's `load(source)` runs in a thread worker and must not touch widgets;
the worker only posts a message back, and `show(data)` builds the widgets on
the UI thread. Errors become a message inside the view, never a traceback.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from diag.errors import DiagError
from diag.tui.source import Source


class View(Vertical):
    """A tab's content. Subclasses set TITLE and implement load() and show()."""

    TITLE: ClassVar[str] = ""
    HELP: ClassVar[str] = ""

    class Loaded(Message):
        def __init__(self, data: Any) -> None:
            super().__init__()
            self.data = data

    class Failed(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, source: Source, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.started = False
        self.ready = False
        self.filter_text = ""

    def compose(self):  # noqa: ANN201
        # Plain text, not an animated LoadingIndicator: its redraws compete for the GIL with the loader.
        yield Static("Loading…", classes="loading")

    def ensure_loaded(self) -> None:
        """Start loading this view's data, the first time it is asked."""
        if not self.started:
            self.started = True
            self.run_worker(self._load, thread=True, name=f"load {self.TITLE}", group="load")

    def _load(self) -> None:
        try:
            data = self.load(self.source)
        except DiagError as exc:
            self.post_message(self.Failed(exc.message))
        except Exception as exc:  # noqa: BLE001 - a view that cannot build says so instead of crashing
            self.post_message(self.Failed(f"could not build this view: {exc.__class__.__name__}: {exc}"))
        else:
            self.post_message(self.Loaded(data))

    async def on_view_loaded(self, message: Loaded) -> None:
        message.stop()
        await self.query(".loading").remove()
        try:
            self.show(message.data)
        except Exception as exc:  # noqa: BLE001 - same as above, for the widget-building half
            await self.remove_children()
            self.mount(Static(Text(f"could not show this view: {exc.__class__.__name__}: {exc}"), classes="problem"))
        # Ready (and focused) after the refresh: show() may mount into a container not mounted yet,
        # and a widget focused before it is in the DOM swallows every key (1-9, tab) until focus moves.
        self.call_after_refresh(self._settled)

    def _settled(self) -> None:
        self.ready = True
        if self.filter_text:
            self.apply_filter(self.filter_text)
        self.focus_main()

    async def on_view_failed(self, message: Failed) -> None:
        message.stop()
        await self.query(".loading").remove()
        self.mount(Static(Text(message.text), classes="problem"))
        self.ready = True

    def load(self, source: Source) -> Any:
        """Read what the view needs (runs in a worker thread; no widgets here)."""
        raise NotImplementedError

    def show(self, data: Any) -> None:
        """Mount the widgets for `data` (UI thread)."""
        raise NotImplementedError

    def apply_filter(self, text: str) -> str | None:
        """Filter the view's list; returns a status line, or None when it has nothing to filter."""
        return None

    def focus_main(self) -> None:
        """Give focus to the view's main list, if it has one."""
        for widget in self.query("DataTable, OptionList"):
            if widget.display:
                widget.focus(scroll_visible=False)  # the view opens at its top, its heading in sight
                return
