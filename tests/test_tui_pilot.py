"""Pilot tests: keys and mouse move between views, filters narrow lists, bad input gets a message."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest
from textual.widgets import Input, OptionList, Static, TabbedContent
from tui_support import app_for, canned_diagnosis, sync, wait_loaded

from diag.engine.diagnosis import Diagnosis, Finding
from diag.errors import DiagError
from diag.store.run import open_run
from diag.tui import make_app, run_tui
from diag.tui.app import VIEWS, pane_id
from diag.tui.help import HelpScreen
from diag.tui.source import RunSource
from diag.tui.widgets.frame_table import FrameTable


def active(app) -> str:  # noqa: ANN001
    return app.query_one("#views", TabbedContent).active


def problems(app) -> list[str]:  # noqa: ANN001
    return [str(s.render()) for s in app.query(".problem").results(Static)]


@sync
async def test_number_keys_tab_and_click_switch_views(tui_runs):
    app = app_for(tui_runs, "gpu_compute")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        assert active(app) == "tab-overview"
        for i, view in enumerate(VIEWS, 1):
            await pilot.press(str(i))
            await wait_loaded(pilot)
            assert active(app) == pane_id(view)
            assert app.current_view().ready
        await pilot.press("tab")
        assert active(app) == "tab-overview"
        await pilot.press("shift+tab")
        assert active(app) == pane_id(VIEWS[-1])
        await pilot.click("#--content-tab-tab-kernels")
        await wait_loaded(pilot)
        assert active(app) == "tab-kernels"
        assert problems(app) == []


@sync
async def test_filter_findings_then_clear(tui_runs):
    app = app_for(tui_runs, "gpu_compute")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await wait_loaded(pilot)
        options = app.query_one("#finding-list", OptionList)
        assert options.option_count == 3
        await pilot.press("slash", *"pageable")
        filt = app.query_one("#filter", Input)
        assert filt.display and filt.has_focus
        assert options.option_count == 1
        assert "pageable" in str(options.get_option_at_index(0).prompt)
        assert filt.border_subtitle == "1 of 3 findings"
        await pilot.press("escape")
        assert not filt.display
        assert options.option_count == 3


@sync
async def test_filter_kept_with_enter_and_detail_follows_selection(tui_runs):
    app = app_for(tui_runs, "gpu_compute")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        await wait_loaded(pilot)
        await pilot.press("down")
        await pilot.pause()
        view = app.current_view()
        assert view.query_one("#finding-list", OptionList).highlighted == 1
        await pilot.press("slash", *"startup", "enter")
        assert not app.query_one("#filter", Input).display
        assert view.query_one("#finding-list", OptionList).option_count == 1
        assert view.query_one("#finding-list", OptionList).has_focus


@sync
async def test_filter_kernels_table(tui_runs):
    app = app_for(tui_runs, "gpu_compute")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("6")
        await wait_loaded(pilot)
        table = app.query_one("#kernel-top", FrameTable)
        assert table.row_count == 4
        await pilot.press("slash", *"GEMM")
        assert table.row_count == 1
        await pilot.press("escape")
        assert table.row_count == 4


@sync
async def test_filter_on_a_view_without_a_list_says_so(tui_runs):
    app = app_for(tui_runs, "gpu_compute")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("slash")
        assert not app.query_one("#filter", Input).display
        assert any("Nothing to filter" in str(n.message) for n in app._notifications)


@sync
async def test_stacks_phase_key_cycles(tui_runs):
    app = app_for(tui_runs, "gpu_compute")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("5")
        await wait_loaded(pilot)
        view = app.current_view()
        assert view.phase == "steady"
        await pilot.press("p")
        assert view.phase != "steady"
        seen = {view.phase}
        for _ in range(len(view.phases)):
            await pilot.press("p")
            seen.add(view.phase)
        assert seen == set(view.phases)


@sync
async def test_help_opens_and_closes_and_q_quits(tui_runs):
    app = app_for(tui_runs, "cpu_preprocess")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
    assert app.return_code == 0


@sync
async def test_no_gpu_timeline_says_why(tui_runs):
    app = app_for(tui_runs, "cpu_preprocess")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await wait_loaded(pilot)
        notes = [str(s.render()) for s in app.query(".notice").results(Static)]
        assert notes == ["No GPU series: the gpu collector was unavailable (NVML: driver not loaded)."]
        await pilot.press("6")
        await wait_loaded(pilot)
        notes = [str(s.render()) for s in app.query("#view-kernels .notice").results(Static)]
        assert notes == ["No kernel data: the kernels collector was off (no CUDA device)."]


class BrokenSource(RunSource):
    """A source whose analysis breaks, as a bug or an odd run would."""

    def timeline(self, max_points: int = 2000):  # noqa: ANN201
        raise ValueError("boom")


@sync
async def test_a_view_that_cannot_load_shows_a_message(tui_runs):
    source = BrokenSource(open_run(tui_runs["gpu_compute"]), canned_diagnosis("gpu_compute"))
    app = make_app(source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("3")
        await wait_loaded(pilot)
        assert problems(app) == ["could not build this view: ValueError: boom"]
        await pilot.press("1")  # the rest still works
        await wait_loaded(pilot)
        assert app.current_view().ready


@sync
async def test_corrupt_table_is_a_message_inside_the_app(tui_runs, tmp_path):
    run = shutil.copytree(tui_runs["gpu_compute"], tmp_path / "run")
    (run / "kernels.parquet").write_bytes(b"not parquet")
    app = make_app(RunSource(open_run(str(run)), canned_diagnosis("gpu_compute")))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("6")
        await wait_loaded(pilot)
        [text] = problems(app)
        assert "kernels.parquet: unreadable Parquet table" in text


@sync
async def test_partial_run_is_flagged_on_the_overview(tui_runs, tmp_path):
    run = shutil.copytree(tui_runs["cpu_preprocess"], tmp_path / "run")
    manifest = json.loads((run / "run.json").read_text())
    manifest["partial"] = True
    (run / "run.json").write_text(json.dumps(manifest))
    app = make_app(RunSource(open_run(str(run)), canned_diagnosis("cpu_preprocess")))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_loaded(pilot)
        assert "PARTIAL RUN" in str(app.query_one("#run-line", Static).render())


def test_run_tui_bad_input_is_one_line(tmp_path):
    with pytest.raises(DiagError, match="no such run directory"):
        run_tui(str(tmp_path / "missing"))
    with pytest.raises(DiagError, match="not a diag run"):
        run_tui(str(tmp_path))
    (tmp_path / "run.json").write_text("{ not json")
    with pytest.raises(DiagError, match="corrupt manifest"):
        run_tui(str(tmp_path))


def test_run_tui_needs_a_terminal(tui_runs):
    # pytest captures stdout, so this is not a terminal: a clear message, not a hung app.
    with pytest.raises(DiagError, match="interactive terminal"):
        run_tui(tui_runs["cpu_preprocess"])


def test_make_app_takes_a_path(tui_runs):
    app = make_app(tui_runs["cpu_preprocess"])
    assert isinstance(app.source, RunSource)
    assert os.path.samefile(app.source.run.path, tui_runs["cpu_preprocess"])


class SlowSource(RunSource):
    """A source whose diagnosis waits for the test to release it."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.release = threading.Event()

    def _diagnose(self):  # noqa: ANN202
        assert self.release.wait(10)
        return canned_diagnosis("gpu_compute")


@sync
async def test_run_is_painted_before_the_diagnosis_and_other_views_do_not_wait(tui_runs):
    source = SlowSource(open_run(tui_runs["gpu_compute"]))
    app = make_app(source)
    app.animation_level = "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert str(app.query_one("#verdict", Static).render()) == "Diagnosing…"
        assert "python serve.py --batch 8 · 20 s · NVIDIA H200" in str(app.query_one("#run-line", Static).render())
        for key in ("4", "6", "7"):  # Latency, Kernels, Run need no diagnosis
            await pilot.press(key)
            await wait_loaded(pilot)
        await pilot.press("1")
        assert not app.current_view().ready
        source.release.set()
        await wait_loaded(pilot)
        assert str(app.query_one("#verdict", Static).render()).startswith("compute_bound")


@sync
async def test_a_run_with_nothing_recorded_explains_every_view(tui_runs, tmp_path):
    run = shutil.copytree(tui_runs["cpu_preprocess"], tmp_path / "run")
    for name in ("steps", "ranges", "stacks", "host", "threads", "system", "events"):
        (run / f"{name}.parquet").unlink()
    diagnosis = Diagnosis(run={}, primary=None, scores={}, phases=[], metrics={}, findings=[
        Finding("verdict.insufficient_evidence", None, "info", "Too little evidence: no steps were recorded")])
    app = make_app(RunSource(open_run(str(run)), diagnosis))
    app.animation_level = "none"
    seen = {}
    async with app.run_test(size=(80, 24)) as pilot:
        for i in range(1, len(VIEWS) + 1):
            await pilot.press(str(i))
            await wait_loaded(pilot)
            view = app.current_view()
            seen[view.TITLE] = [str(s.render()) for s in view.query(".problem, .notice").results(Static)]
        verdict = str(app.query_one("#verdict", Static).render())
    assert verdict == "No verdict  —  Too little evidence: no steps were recorded"
    assert seen["Timeline"][-1] == "Nothing was sampled over time in this run."
    assert seen["Latency"] == ["No steps or requests were recorded: no model call was seen."]
    assert seen["Stacks"] == ["No Python stack samples: the stacks collector ran but recorded none."]
    assert seen["Kernels"] == ["No kernel data: the kernels collector was off (no CUDA device)."]
