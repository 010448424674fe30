"""The Textual TUI: `diag tui RUN`. `run_tui(path)` for the CLI, `make_app(source)` for tests."""

from diag.tui.app import DiagApp, make_app, run_tui

__all__ = ["DiagApp", "make_app", "run_tui"]
