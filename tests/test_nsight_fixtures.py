"""The Nsight Systems reader on exports built to NVIDIA's documented SQLite schema.

tests/data/nsight/make_fixtures.py writes the files (no public export exists and
nsys does not run on our GPU box: docs/run-format.md). Each test checks what
diag/store/nsight.py makes of the rows the script wrote, and the verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from diag.engine.diagnose import diagnose
from diag.store.importers import import_trace

HERE = os.path.join(os.path.dirname(__file__), "data", "nsight")
EPOCH_NS = 1_700_000_000_000_000_000
PID, TID = 4242, 4243


def load(name: str):
    return import_trace(os.path.join(HERE, name))


def test_compute_heavy_tables_and_verdict() -> None:
    run = load("compute_heavy.sqlite")
    k = run.table("kernels")
    kernels = k[k["kind"] == "kernel"]
    assert len(kernels) == 1500 and (k["kind"] == "memcpy").sum() == 1
    assert dict(kernels["category"].value_counts()) == {"gemm": 500, "attention": 500, "elementwise": 500}
    first = kernels.sort_values("ts_ns").iloc[0]
    assert first["ts_ns"] == EPOCH_NS + 3_000_000  # session start + ns from it
    assert first["dur_ns"] == 3_000_000 and first["name"].startswith("sm90_xmma_gemm")  # demangledName via StringIds
    assert first["grid"] == "[132,1,1]" and first["block"] == "[384,1,1]" and first["pid"] == PID
    copy = k[k["kind"] == "memcpy"].iloc[0]
    assert (copy["copy_kind"], copy["src_mem"], copy["dst_mem"], copy["bytes"]) == ("HtoD", "pinned", "device", 256 << 20)
    assert run.table("ranges").empty and run.table("steps").empty
    d = diagnose(run)
    assert d.primary == "compute_bound", [f.rule for f in d.findings]


def test_transfer_heavy_tables() -> None:
    k = load("transfer_heavy.sqlite").table("kernels")
    assert dict(k["kind"].value_counts()) == {"memcpy": 400, "kernel": 200, "memset": 200}
    h2d = k[(k["kind"] == "memcpy") & (k["copy_kind"] == "HtoD")]
    d2h = k[(k["kind"] == "memcpy") & (k["copy_kind"] == "DtoH")]
    assert len(h2d) == len(d2h) == 200
    assert set(h2d["src_mem"]) == {"pageable"} and set(h2d["dst_mem"]) == {"device"}
    assert set(d2h["dst_mem"]) == {"pageable"} and set(h2d["bytes"]) == {64 << 20}
    assert h2d["name"].iloc[0] == "Memcpy HtoD (pageable -> device)"
    assert set(k[k["kind"] == "memset"]["bytes"]) == {1 << 20}


def test_transfer_heavy_verdict() -> None:
    """No steps, copies fill the GPU's timeline: judged (copy time is busy time), not declined as idle."""
    d = diagnose(load("transfer_heavy.sqlite"))
    assert d.primary == "transfer_bound", [(f.rule, f.title) for f in d.findings]


def test_nvtx_requests_ranges_and_verdict() -> None:
    run = load("nvtx_requests.sqlite")
    r = run.table("ranges")
    assert dict(r["name"].value_counts()) == {"request": 40, "prefill": 40, "decode": 40, "serve_loop": 1}
    assert set(r[r["name"] == "request"]["kind"]) == {"request"} and set(r[r["name"] != "request"]["kind"]) == {"stage"}
    assert set(r["domain"]) == {"vllm"} and set(r["source"]) == {"nvtx"}
    assert set(r["pid"]) == {PID} and set(r["tid"]) == {TID}
    # serve_loop (start/end) holds every request, which holds its prefill and decode
    depth = r.groupby("name")["depth"].agg(set).to_dict()
    assert depth == {"serve_loop": {0}, "request": {1}, "prefill": {2}, "decode": {2}}
    req = r[r["name"] == "request"].sort_values("ts_ns").iloc[0]
    assert req["ts_ns"] == EPOCH_NS + 1_000_000
    assert len(run.table("kernels")) == 40 * 48
    d = diagnose(run)
    assert d.primary == "compute_bound", [f.rule for f in d.findings]


def test_fixtures_are_what_the_script_writes(tmp_path) -> None:
    # the committed files are the script's output: rebuild them elsewhere and compare the rows
    import sqlite3

    shutil.copy(os.path.join(HERE, "make_fixtures.py"), tmp_path)
    subprocess.run([sys.executable, str(tmp_path / "make_fixtures.py")], check=True, capture_output=True)
    for name in ("compute_heavy.sqlite", "transfer_heavy.sqlite", "nvtx_requests.sqlite"):
        def dump(path: str) -> list[str]:
            db = sqlite3.connect(path)
            try:
                return list(db.iterdump())
            finally:
                db.close()
        assert dump(str(tmp_path / name)) == dump(os.path.join(HERE, name)), name
