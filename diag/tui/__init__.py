"""The Textual TUI: `diag tui RUN`. `run_tui(path)` for the CLI, `make_app(source)` for tests.

Textual is imported only when one of these is used, so `diag.tui.source`
stays importable without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DiagApp", "make_app", "run_tui"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from diag.tui import app

        return getattr(app, name)
    raise AttributeError(f"module 'diag.tui' has no attribute {name!r}")
