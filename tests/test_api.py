"""diag.request() / diag.stage(): no-ops outside diag, nested ranges under it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import diag
from diag.store.run import open_run

TARGET = """
import diag
with diag.request():
    with diag.stage("preprocess"):
        pass
    with diag.stage("infer"):
        pass
"""


def test_outside_diag_they_do_nothing() -> None:
    with diag.request(), diag.stage("x"):
        value = 1
    assert value == 1


def test_ranges_nest_with_their_depth(tmp_path: Path) -> None:
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "diag", "profile", "--out", str(out), "--quiet", "--no-stacks",
                    "--no-gpu", "--", sys.executable, "-c", TARGET], check=True, timeout=60)
    ranges = open_run(str(out)).table("ranges").sort_values(["depth", "name"])
    assert ranges[["name", "kind", "depth"]].values.tolist() == [
        ["request", "request", 0], ["infer", "stage", 1], ["preprocess", "stage", 1]]
    assert set(ranges["source"]) == {"diag"}
