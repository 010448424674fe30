"""Where the report goes: -o rules, the default name, unwritable paths, bad runs."""

from __future__ import annotations

import os

import pytest
from report_fixtures import make_diagnosis

from diag.errors import DiagError
from diag.report import report_path, write_report
from diag.store.run import open_run
from diag.synthetic import write_synthetic_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return open_run(write_synthetic_run(str(tmp_path_factory.mktemp("out") / "run"), 8.0, "cpu_preprocess"))


def test_default_is_report_html_in_the_run(tmp_path):
    os.makedirs(tmp_path / "run")
    assert report_path(str(tmp_path / "run")) == str(tmp_path / "run" / "report.html")


def test_default_never_overwrites(tmp_path):
    folder = tmp_path / "run"
    os.makedirs(folder)
    (folder / "report.html").write_text("old")
    (folder / "report-1.html").write_text("older")
    assert report_path(str(folder)) == str(folder / "report-2.html")


def test_explicit_path_is_replaced(tmp_path, run):
    out = tmp_path / "mine.html"
    out.write_text("old report")
    written = write_report(run, make_diagnosis(8.0), str(out))
    assert written == str(out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    # No temporary file is left behind.
    assert sorted(os.listdir(tmp_path)) == ["mine.html"]


def test_write_report_default_twice_keeps_both(run):
    first = write_report(run, make_diagnosis(8.0))
    second = write_report(run, make_diagnosis(8.0))
    try:
        assert first != second
        assert os.path.dirname(first) == os.path.dirname(second) == os.path.abspath(run.path)
        assert os.path.basename(second) == "report-1.html"
    finally:
        os.unlink(first)
        os.unlink(second)


@pytest.mark.parametrize("bad,message", [
    ("{tmp}", "is a directory"),
    ("{tmp}/no/such/folder/r.html", "does not exist"),
    ("{tmp}/afile/r.html", "does not exist"),
])
def test_bad_explicit_paths(tmp_path, bad, message):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(DiagError, match=message):
        report_path(str(tmp_path / "run"), bad.format(tmp=tmp_path))


def test_unwritable_folder_is_one_line_error(tmp_path, monkeypatch):
    # Root ignores permissions, so the check is driven through os.access.
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(tmp_path) else real(p, m))
    with pytest.raises(DiagError, match="not writable"):
        report_path("run", str(tmp_path / "r.html"))
    with pytest.raises(DiagError, match="pass -o FILE"):
        report_path(str(tmp_path))


def test_write_failure_is_diag_error(run):
    # /proc accepts no new files, even for root.
    with pytest.raises(DiagError, match="cannot write the report") as err:
        write_report(run, make_diagnosis(8.0), "/proc/diag-report.html")
    assert "\n" not in str(err.value)


def test_missing_and_corrupt_runs_are_one_line_errors(tmp_path):
    with pytest.raises(DiagError, match="no such run directory"):
        open_run(str(tmp_path / "nope"))
    os.makedirs(tmp_path / "bad")
    (tmp_path / "bad" / "run.json").write_text("{not json")
    with pytest.raises(DiagError, match="corrupt manifest"):
        open_run(str(tmp_path / "bad"))
