"""The self-contained HTML report: `diag report RUN [-o FILE] [--cdn]`.

Data first (data.py: plain dicts from the Diagnosis and diag.analysis), then
rendering (figures.py: Plotly figures; render.py: one Jinja2 environment,
autoescape on). output.py decides where the file goes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diag.report.data import build_report_data
from diag.report.output import report_path, write_text_atomic
from diag.report.render import render_html

if TYPE_CHECKING:
    from diag.engine.diagnosis import Diagnosis
    from diag.store.run import Run

__all__ = ["build_report_data", "render_html", "report_path", "write_report"]


def write_report(run: Run, diagnosis: Diagnosis, out_path: str | None = None, cdn: bool = False) -> str:
    """Write the report of `run` and return the path written.

    `out_path` is the user's `-o` (replaced if it exists), or None for the
    default: `RUN/report.html`, or the first free `RUN/report-N.html`.
    Raises DiagError (one line) when the path cannot be written.
    """
    path = report_path(run.path, out_path)
    html = render_html(build_report_data(run, diagnosis), cdn=cdn)
    write_text_atomic(path, html)
    return path
