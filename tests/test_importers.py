"""Importing other tools' traces: Kineto JSON and Nsight Systems SQLite become a Run."""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3

import pytest

from diag.errors import DiagError
from diag.store.importers import import_trace
from diag.store.run import TABLES

TRACES = os.path.join(os.path.dirname(__file__), "data", "traces")
EPOCH = 1_796_000_000_000_000_000
PID, TID = 4242, 4243
GTID = (PID << 24) | TID


def make_nsys(path: str, epoch: bool = True) -> None:
    """A small database with the tables and columns of `nsys export --type sqlite`."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
            demangledName INTEGER, shortName INTEGER, mangledName INTEGER, gridX INTEGER, gridY INTEGER,
            gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
            bytes INTEGER, copyKind INTEGER, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER,
            value INTEGER, bytes INTEGER, memKind INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
            endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER);
    """)
    names = ["nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "void at::native::vectorized_elementwise_kernel<4>",
             "void pytorch_flash::flash_fwd_kernel<>"]
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i + 1, n) for i, n in enumerate(names)]
                   + [(10, "preprocess")])
    gpid = PID << 24
    kernels = [(1_000_000 + i * 100_000, 1_050_000 + i * 100_000, 0, 1, 7, i, gpid, 1 + i % 3, 0, 0,
                132, 1, 1, 384, 1, 1, 168) for i in range(6)]
    db.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * 17)})", kernels)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [
        (900_000, 990_000, 0, 1, 7, 100, gpid, 4 << 20, 1, 0, 1, 3),   # HtoD pageable -> device
        (1_700_000, 1_710_000, 0, 1, 7, 101, gpid, 4096, 2, 0, 3, 2),  # DtoH device -> pinned
    ])
    db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?,?)",
               (950_000, 951_000, 0, 1, 7, 102, gpid, 0, 1024, 3))
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [
        (100, None, 75, None, None, None, "serving", GTID, None, None, 1, None),       # domain create
        (500_000, 1_800_000, 59, None, None, None, "request", GTID, None, None, 1, None),
        (600_000, 880_000, 59, None, None, None, None, GTID, None, 10, 1, None),       # registered string
        (2_000_000, 2_500_000, 60, 1, None, None, "request", GTID, GTID, None, 0, None),
        (2_600_000, None, 59, None, None, None, "never_closed", GTID, None, None, 0, None),
        (700_000, None, 34, None, None, None, "a mark", GTID, None, None, 0, None),
    ])
    if epoch:
        db.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)")
        db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (EPOCH,))
    db.commit()
    db.close()


def test_import_nsys(tmp_path) -> None:
    path = str(tmp_path / "report.sqlite")
    make_nsys(path)
    run = import_trace(path)
    assert run.manifest["schema"] == "diag.run/1"
    assert run.manifest["imported_from"]["format"] == "nsys-sqlite"
    assert run.manifest["collectors"]["host"] == {"status": "off", "reason": "imported trace"}
    k = run.table("kernels")
    assert len(k) == 6 + 2 + 1
    kern = k[k["kind"] == "kernel"]
    assert list(kern["category"][:3]) == ["gemm", "elementwise", "attention"]
    assert int(kern["ts_ns"].iloc[0]) == EPOCH + 1_000_000 and int(kern["dur_ns"].iloc[0]) == 50_000
    assert kern["grid"].iloc[0] == "[132,1,1]" and set(kern["pid"]) == {PID}
    h2d = k[k["copy_kind"] == "HtoD"].iloc[0]
    assert (h2d["src_mem"], h2d["dst_mem"], int(h2d["bytes"])) == ("pageable", "device", 4 << 20)
    d2h = k[k["copy_kind"] == "DtoH"].iloc[0]
    assert (d2h["src_mem"], d2h["dst_mem"]) == ("device", "pinned")
    assert (k["kind"] == "memset").sum() == 1
    r = run.table("ranges")
    assert list(r["name"]) == ["request", "preprocess", "request"]
    assert list(r["kind"]) == ["request", "stage", "request"]
    assert list(r["depth"]) == [0, 1, 0]
    assert set(r["pid"]) == {PID} and set(r["tid"]) == {TID}
    assert r["domain"].iloc[0] == "serving"
    assert run.start_ns == EPOCH + 500_000 and run.duration_s == pytest.approx(2.0e-3)
    for name in TABLES:  # every table answers, with its columns
        assert set(TABLES[name]) <= set(run.table(name).columns)
    assert run.table("host").empty and run.table("stacks").empty


def test_import_nsys_without_epoch(tmp_path) -> None:
    path = str(tmp_path / "old.sqlite")
    make_nsys(path, epoch=False)
    run = import_trace(path)
    assert int(run.table("kernels")["ts_ns"].min()) == 900_000  # ns from the session start


def test_import_kineto(tmp_path) -> None:
    run = import_trace(os.path.join(TRACES, "kineto_cuda_synthetic.json"))
    assert run.manifest["imported_from"]["format"] == "kineto"
    assert run.manifest["gpu"]["devices"][0]["name"] == "NVIDIA H200"
    assert len(run.table("kernels")) == 18
    assert list(run.table("steps")["seq"]) == [21, 22]
    assert list(run.table("ranges")["kind"]) == ["request", "stage"] * 2
    (w,) = run.table("windows").to_dict("records")
    # the window is the GPU's active span, not the host annotations around it
    k = run.table("kernels")
    assert w["steps"] == 2 and w["ts_ns"] == k["ts_ns"].min() > run.start_ns
    assert w["ts_ns"] + w["dur_ns"] == (k["ts_ns"] + k["dur_ns"]).max()
    # gzipped traces read the same
    gz = tmp_path / "trace.json.gz"
    with open(os.path.join(TRACES, "kineto_cuda_synthetic.json"), "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert len(import_trace(str(gz)).table("kernels")) == 18


@pytest.mark.parametrize("content, message", [
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel"', "not a readable trace JSON"),
    (b"\x00\x01garbage", "not a readable trace JSON"),
    (b'{"hello": 1}', "not a readable trace JSON"),
    (b'{"traceEvents": []}', "no kernels, steps or annotations"),
    (b"SQLite format 3\x00" + b"\x00" * 200, "unreadable Nsight Systems export"),
])
def test_bad_files_are_one_line_errors(tmp_path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(DiagError) as err:
        import_trace(str(path))
    assert message in err.value.message and "\n" not in err.value.message


def test_not_nsys_sqlite_and_missing(tmp_path) -> None:
    path = str(tmp_path / "other.sqlite")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(DiagError, match="not an Nsight Systems export"):
        import_trace(path)
    with pytest.raises(DiagError, match="no such trace file"):
        import_trace(str(tmp_path / "nope.json"))
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"binary")
    with pytest.raises(DiagError, match="nsys export --type sqlite"):
        import_trace(str(rep))


def test_registry_sniffs_each_format_and_names_it_in_the_manifest(tmp_path) -> None:
    from diag.store.importers import IMPORTERS, importer_for

    db = str(tmp_path / "report.db")  # sniffed by content, whatever the name
    make_nsys(db)
    kineto = os.path.join(TRACES, "kineto_cuda_synthetic.json")
    rep = tmp_path / "x.nsys-rep"
    rep.write_bytes(b"binary")
    assert [importer_for(p).name for p in (db, kineto, str(rep))] == ["nsys-sqlite", "kineto", "nsys-sqlite"]
    for path in (db, kineto):
        assert import_trace(path).manifest["imported_from"]["format"] == importer_for(path).name
    assert IMPORTERS[-1].name == "kineto"  # takes what no other format claims
    assert len({i.name for i in IMPORTERS}) == len(IMPORTERS)


def test_cli_help_and_run_errors_list_the_registry_without_loading_pandas(tmp_path) -> None:
    import subprocess
    import sys

    from diag.cli import build_parser
    from diag.store.importers import IMPORTERS, formats_text
    from diag.store.run import open_run

    assert all(i.title in formats_text() for i in IMPORTERS)
    assert formats_text() in " ".join(build_parser().format_help().split())  # help wraps lines
    path = tmp_path / "trace.bin"
    path.write_bytes(b"x")
    with pytest.raises(DiagError, match="also reads traces: " + formats_text()):
        open_run(str(path))
    code = "import sys, diag.cli; diag.cli.build_parser(); print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
