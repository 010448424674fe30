"""The `?` help screen: keys, and what each view shows."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

KEYS = """\
| key | does |
|---|---|
| `1`…`7`, `tab`, `shift+tab` | switch view (or click a tab) |
| `↑` `↓` `pgup` `pgdn` | move in lists, scroll |
| `/` | filter the list in this view; `enter` keeps it, `esc` clears it |
| `p` | Stacks: next phase |
| `?` | this help |
| `q` | quit |
"""


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
        rows = "\n".join(f"| {i} {title} | {text} |" for i, (title, text) in enumerate(self.views, 1))
        text = f"# diag tui\n\n{KEYS}\n## Views\n\n| view | shows |\n|---|---|\n{rows}\n"
        with VerticalScroll(id="help-body"):
            yield Markdown(text)

    def action_dismiss(self, result: None = None) -> None:  # noqa: ARG002
        self.dismiss(None)
