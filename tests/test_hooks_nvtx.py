"""nvtx package hooks: all three range styles recorded, and still handed to the real nvtx."""

from __future__ import annotations

import pytest
from hooks_support import run_target

pytest.importorskip("nvtx")

TARGET = """
import sys, nvtx
import nvtx.nvtx as impl

# The real functions are still what runs underneath (Nsight Systems sees them).
assert nvtx.push_range is not nvtx.push_range.__wrapped__ and nvtx.push_range.__wrapped__.__module__ == "nvtx.nvtx"
assert impl.push_range is nvtx.push_range
assert issubclass(nvtx.annotate, nvtx.annotate.__mro__[1]) and nvtx.annotate.__mro__[1].__module__ == "nvtx.nvtx"

with nvtx.annotate("request", color="green"):
    with nvtx.annotate("preprocess", domain="app"):
        pass

@nvtx.annotate("decorated", domain="app")
def work(x):
    return x + 1

@nvtx.annotate()
def named_after_me():
    return 2

assert work(1) == 2 and named_after_me() == 2 and work.__name__ == "work"
nvtx.push_range("pushed", domain="app")
nvtx.push_range("request")
nvtx.pop_range()
nvtx.pop_range(domain="app")
rid = nvtx.start_range("started", domain="app")
nvtx.end_range(rid)
nvtx.mark("tick")
ann = nvtx.annotate("reused")
for _ in range(2):
    with ann:
        pass
print("torch" in sys.modules)
"""


def test_all_styles_recorded(tmp_path) -> None:
    run, proc = run_target(tmp_path, TARGET)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"  # nvtx alone never pulls in torch
    ranges = run.table("ranges")
    assert set(ranges["source"]) == {"nvtx"}
    got = sorted(zip(ranges["name"], ranges["domain"], ranges["kind"], strict=True))
    assert got == sorted([
        ("request", "", "request"), ("preprocess", "app", "stage"), ("decorated", "app", "stage"),
        ("named_after_me", "", "stage"), ("pushed", "app", "stage"), ("request", "", "request"),
        ("started", "app", "stage"), ("reused", "", "stage"), ("reused", "", "stage"),
    ])
    depth = {(n, d): int(v) for n, d, v in zip(ranges["name"], ranges["domain"], ranges["depth"], strict=True)}
    assert depth[("preprocess", "app")] == 1 and depth[("pushed", "app")] == 0
    outer = ranges[(ranges["name"] == "request") & (ranges["depth"] == 0)].iloc[0]
    inner = ranges[ranges["name"] == "preprocess"].iloc[0]
    assert outer["ts_ns"] <= inner["ts_ns"] and inner["ts_ns"] + inner["dur_ns"] <= outer["ts_ns"] + outer["dur_ns"]
    ev = run.table("events")
    assert list(ev[ev["kind"] == "mark"]["name"]) == ["tick"]
    assert "note" not in set(ev["kind"])
