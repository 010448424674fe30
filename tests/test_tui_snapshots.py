"""Snapshot tests (pytest-textual-snapshot) of every view on every fixture run, at 80x24.

Update after an intended change: pytest tests/test_tui_snapshots.py --snapshot-update,
then look at the SVGs (snapshot_report.html) before committing them.
"""

from __future__ import annotations

import pytest
from tui_support import FIXTURES, app_for, wait_loaded

from diag.tui.app import VIEWS

SIZE = (80, 24)


def _show(key: str, *more: str):  # noqa: ANN202
    async def run_before(pilot) -> None:  # noqa: ANN001
        await wait_loaded(pilot)
        await pilot.press(key)
        await wait_loaded(pilot)
        # A view that could not load would show its message in the snapshot; fail louder than a diff.
        assert not pilot.app.query(".problem"), [str(w.render()) for w in pilot.app.query(".problem")]
        if more:
            await pilot.press(*more)
            await pilot.pause()

    return run_before


@pytest.mark.parametrize("fixture", FIXTURES)
@pytest.mark.parametrize("number", range(1, len(VIEWS) + 1), ids=[v.TITLE.lower() for v in VIEWS])
def test_view(snap_compare, tui_runs, fixture: str, number: int) -> None:
    assert snap_compare(app_for(tui_runs, fixture), terminal_size=SIZE, run_before=_show(str(number)))


def test_help(snap_compare, tui_runs) -> None:
    assert snap_compare(app_for(tui_runs, "gpu_compute"), terminal_size=SIZE,
                        run_before=_show("1", "question_mark"))


def test_findings_filtered(snap_compare, tui_runs) -> None:
    assert snap_compare(app_for(tui_runs, "gpu_compute"), terminal_size=SIZE,
                        run_before=_show("2", "slash", *"copied"))


def test_overview_wide(snap_compare, tui_runs) -> None:
    assert snap_compare(app_for(tui_runs, "gpu_compute"), terminal_size=(120, 36), run_before=_show("1"))
