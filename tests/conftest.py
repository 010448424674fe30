"""Fixtures shared across test modules (pytest finds them here without an import).

Helpers that are plain functions and classes live in modules beside this one:
analysis_fixtures (hand-built runs for analysis and rules), hooks_support
(running a target under the recorder), tui_support and report_fixtures.
"""

from __future__ import annotations

import pytest
from tui_support import write_tui_runs


@pytest.fixture(scope="session")
def tui_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run directories by TUI fixture name: the synthetic ones written once per session."""
    return write_tui_runs(str(tmp_path_factory.mktemp("tui_runs")))
