"""The `?` help screen: keys, and what each view shows."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS: tuple[tuple[str, str], ...] = (
    ("1…{n}  tab  shift+tab", "switch view (or click a tab)"),  # {n}: the number of views
    ("↑ ↓ pgup pgdn", "move in lists, scroll"),
    ("/", "filter the list in this view; enter keeps it, esc clears it"),
    ("p", "Stacks: next phase"),
    ("?", "this help"),
    ("q", "quit"),
)


def _table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None,
                  padding=(0, 2, 0, 0), expand=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(ratio=1)
    for k, v in rows:
        table.add_row(k, v)
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and views; any of esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"), Binding("q", "dismiss", "Close", show=False),
        Binding("question_mark", "dismiss", "Close", show=False),
    ]

    def __init__(self, views: list[tuple[str, str]]) -> None:
        super().__init__()
        self.views = views

    def compose(self) -> ComposeResult:
        views = [(f"{i} {title}", text) for i, (title, text) in enumerate(self.views, 1)]
        keys = [(k.format(n=len(self.views)), text) for k, text in KEYS]
        body = Group(_table("Keys", keys), Text(""), _table("Views", views), Text(""),
                     Text("esc closes this help", style="dim"))
        with VerticalScroll(id="help-body"):
            yield Static(body)

    def action_dismiss(self, result: None = None) -> None:  # noqa: ARG002
        self.dismiss(None)
