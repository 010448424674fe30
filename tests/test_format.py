"""One value, one string: console, TUI and report print every unit the same way (diag/analysis/units.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pandas as pd
import pytest
from rich.console import Console

from diag.analysis.catalog import UNITS
from diag.analysis.collectors import missing_data_note
from diag.analysis.units import format_value
from diag.engine.diagnosis import Evidence, Finding
from diag.report.data import _finding
from diag.report.render import environment
from diag.tui.views.findings import finding_detail
from diag.tui.widgets.frame_table import frame_rows
from diag.views.console import render_text

NAN = float("nan")

# (value, unit, what every view prints)
TABLE = [
    (0.214, "ratio", "21.4%"), (0.0, "ratio", "0.0%"), (1.0, "ratio", "100.0%"),
    (3.0, "factor", "3.00x"), (0.5, "factor", "0.50x"),
    (0.00042, "s", "420 µs"), (4.56, "s", "4.56 s"), (125.0, "s", "2m05s"), (3725.0, "s", "1h02m"), (0.0, "s", "0 s"),
    (2.5, "ms", "2.5 ms"), (1500.0, "ms", "1.5 s"), (0.0123, "ms", "12.3 µs"),
    (40.0, "us", "40 µs"), (999.7, "us", "1 ms"),
    (1_572_864, "bytes", "1.57 MB"), (512, "bytes", "512 B"), (3.0e9, "bytes", "3 GB"),
    (2.5e8, "bytes/s", "250 MB/s"),
    (12345, "count", "12,345"), (1.5, "count", "1.5"),
    (250.0, "per_s", "250/s"), (1.5, "cores", "1.5 cores"),
    (1, "flag", "yes"), (0, "flag", "no"),
    (3.0, "", "3"),
] + [(missing, unit, "–") for unit in UNITS for missing in (None, NAN)]


def _tui(value: float | None, unit: str) -> str:
    """The value column of the TUI's evidence table for one finding."""
    f = Finding("r", None, "info", "t", evidence=[Evidence("m.x", value, unit)])
    console = Console(width=120, color_system=None, record=True)
    with console.capture() as cap:
        console.print(finding_detail(f))
    row = next(line for line in cap.get().splitlines() if "m.x" in line)
    return re.split(r"\s{2,}", row.strip())[1]


def _console(value: float | None, unit: str) -> str | None:
    """The evidence text the console prints for one finding (None when it leaves the value out)."""
    from diag.engine.diagnosis import Diagnosis

    f = Finding("r", None, "info", "t", evidence=[Evidence("m.x", value, unit)])
    d = Diagnosis(run={}, primary=None, scores={}, phases=[], findings=[f], metrics={}, units={})
    m = re.search(r"m\.x = (.+?)(?:, |$)", render_text(d, width=200), re.M)
    return m.group(1).strip() if m else None


def _jinja(value: float | None, unit: str) -> str:
    return environment().from_string("{{ v|value(u) }}").render(v=value, u=unit)


def test_every_catalog_unit_has_a_row():
    assert set(UNITS) <= {unit for v, unit, _ in TABLE if v is not None}


@pytest.mark.parametrize("value,unit,text", TABLE)
def test_every_view_prints_the_same(value, unit, text):
    assert format_value(value, unit) == text
    assert _tui(value, unit) == text
    assert _finding(Finding("r", None, "info", "t", evidence=[Evidence("m.x", value, unit)])
                    )["evidence"][0]["text"] == text
    assert _jinja(value, unit) == text
    shown = _console(value, unit)
    # The console leaves out evidence with no value (None); anything it prints is the shared text.
    assert shown == (None if value is None else text)


@pytest.mark.parametrize("column,value,text", [
    ("p50_ms", 2.0, "2 ms"), ("self_s", 7.68, "7.68 s"), ("mean_us", 40.0, "40 µs"), ("share", 0.614, "61.4%"),
    ("bytes", 1_572_864, "1.57 MB"), ("gb_per_s", 22.47, "22.5 GB/s"), ("count", 3100, "3,100"),
    ("in_model", True, "yes"), ("name", "fwd", "fwd"), ("p99_ms", NAN, "–"),
])
def test_table_cells_take_units_from_column_names(column, value, text):
    # TUI tables and the report's tables read the unit from the column's name, the same way.
    assert frame_rows(pd.DataFrame({column: [value]}), [column]) == [[text]]
    assert environment().from_string("{{ v|cell(c) }}").render(v=value, c=column) == text


def test_formatting_needs_no_view_library():
    code = ("import sys, diag.analysis.units; "
            "print(sorted(m for m in ('rich', 'textual', 'plotly', 'pandas', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_collector_notes_say_why_data_is_missing():
    # The TUI and the report show this same text when a collector left no data.
    off = {"kernels": {"status": "off", "reason": "no CUDA device"}}
    assert missing_data_note(off, "kernels") == "No kernel data: the kernels collector was off (no CUDA device)."
    assert missing_data_note({}, "stacks") == "No Python stack samples: the stacks collector did not report."
    assert missing_data_note({"gpu": {"status": "ok"}}, "gpu") == "No GPU series: the gpu collector ran but recorded none."
