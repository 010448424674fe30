"""The TUI's pure helpers: formatting, chart binning, histogram bins, phases, finding text."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
from rich.console import Console
from tui_support import canned_diagnosis

from diag.engine.diagnosis import Phase
from diag.tui.views.findings import finding_detail, matches
from diag.tui.views.overview import key_metrics, run_line
from diag.tui.views.stacks import short_frame
from diag.tui.widgets.frame_table import header
from diag.tui.widgets.histogram import histogram_bins
from diag.tui.widgets.phase_bar import axis, column_phases
from diag.tui.widgets.score_bars import bar
from diag.tui.widgets.time_chart import bin_columns, chart_rows, scale_top


def test_column_headers_drop_their_units():
    assert header("p99_ms") == "p99" and header("gb_per_s") == "GB/s" and header("name") == "name"


def test_frames_get_short_paths():
    site = "forward (/work/.venv/lib/python3.11/site-packages/torch/nn/modules/linear.py:125)"
    assert short_frame(site) == "forward (torch/nn/modules/linear.py:125)"
    assert short_frame("handle (/srv/app/serve.py:40)", "/srv/app") == "handle (serve.py:40)"
    assert short_frame("<native>") == "<native>"


def test_bar_fills_in_eighths():
    assert bar(0.0, 4) == "    "
    assert bar(1.0, 4) == "████"
    assert bar(0.5, 4) == "██  "
    assert bar(1.5, 4) == "████"
    assert len(bar(0.33, 10)) == 10


def test_chart_bins_keep_the_peak_and_align_to_the_run():
    t = np.array([0.5, 1.5, 1.6, 9.5])
    v = np.array([1.0, 2.0, 5.0, 3.0])
    cols = bin_columns(t, v, duration_s=10.0, width=10)
    assert cols[0] == 1.0 and cols[1] == 5.0 and cols[9] == 3.0
    assert np.isnan(cols[2:9]).all()
    rows = chart_rows(np.array([0.0, 50.0, 100.0, np.nan]), top=100.0, height=2)
    assert rows == ["  █ ", " ██ "]
    assert chart_rows(np.array([0.1]), top=100.0, height=1) == ["▁"]
    # 10 samples over 10 s on 25 columns: no holes between samples; a real hole stays empty.
    t = np.array([0.0, 1, 2, 3, 4, 5, 9.0, 9.5, 9.9])
    cols = bin_columns(t, np.ones(len(t)), duration_s=10.0, width=25)
    assert not np.isnan(cols[:13]).any() and np.isnan(cols[14:22]).all()  # small but non-zero still shows
    assert scale_top("%", np.array([20.0, 40.0])) == 100.0
    assert scale_top("GB", np.array([20.0, 40.0])) == 40.0


def test_histogram_folds_the_tail_into_the_last_bin():
    values = np.concatenate([np.linspace(1e-3, 2e-3, 990), np.full(10, 0.5)])
    bins = histogram_bins(values, 10)
    assert len(bins) == 10
    assert sum(c for _, _, c in bins) == 1000
    assert bins[-1][1] == 0.5
    assert histogram_bins(np.array([]), 10) == []
    assert histogram_bins(np.array([2e-3, 2e-3]), 10) == [(2e-3, 2e-3, 2)]


def test_phases_under_columns_and_axis():
    phases = [Phase("startup", 0, 2), Phase("steady", 2, 10)]
    assert column_phases(phases, 10.0, 5) == ["startup", "steady", "steady", "steady", "steady"]
    short = [Phase("startup", 0, 4.5), Phase("steady", 4.5, 3600)]
    assert column_phases(short, 3600.0, 100)[:2] == ["startup", "steady"]
    line = axis(20.0, 40)
    assert len(line) == 40 and line.startswith("0 s") and line.endswith("20 s") and "10 s" in line


def test_finding_text_has_evidence_code_and_gain():
    f = canned_diagnosis("gpu_compute").findings[1]
    console = Console(width=80, record=True, color_system=None)
    console.print(finding_detail(f))
    text = console.export_text()
    assert re.search(r"steady\.copy_share\s+8\.0%\s+> 0\.05\s+ratio", text)
    assert 'x = x.pin_memory().to("cuda", non_blocking=True)' in text
    assert "Expected gain: up to 8%" in text
    assert matches(f, "TRANSFER") and not matches(f, "gc pauses")


def test_overview_helpers():
    d = canned_diagnosis("gpu_compute")
    metrics = dict(key_metrics(d))
    assert metrics["gpu_busy"] == "86.0%" and metrics["step_p50_ms"] == "3.1 ms"
    assert run_line({"command": ["python", "x.py"], "duration_s": 2.0, "exit_code": 1, "partial": True}) == (
        "python x.py · 2 s · no GPU · exit 1 · PARTIAL RUN (recording cut short)")


def test_data_source_module_does_not_import_textual():
    # The data source is plain Python: usable from the report or scripts without Textual.
    code = "import sys, diag.tui.source; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
