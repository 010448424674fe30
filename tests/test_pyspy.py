"""py-spy chrometrace -> stacks: replay of B/E events, truncated files, a real recording."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from diag.store.manifest import SCHEMA, write_manifest
from diag.store.pyspy import parse_pyspy
from diag.store.run import open_run

START = 1_796_000_000_000_000_000
MAIN, WORKER = 139833819282304, 139833806444224


def ev(name: str, ph: str, tid: int, ts: int, filename: str = "/srv/app.py", line: int = 1) -> dict:
    # serde's field order, as py-spy writes it
    return {"args": {"filename": filename, "line": line}, "cat": "py-spy", "name": name, "ph": ph,
            "pid": 4242, "tid": tid, "ts": ts}


EVENTS = [
    ev("<module>", "B", MAIN, 100, line=10), ev("main", "B", MAIN, 100, line=5), ev("work", "B", MAIN, 100, line=2),
    ev("wait", "B", WORKER, 150, "/usr/lib/python3.12/threading.py", 355),
    ev("work", "E", MAIN, 300, line=2), ev("load", "B", MAIN, 300, line=3),
    ev("load", "E", MAIN, 500, line=3), ev("main", "E", MAIN, 500, line=5), ev("main", "B", MAIN, 500, line=6),
    ev("wait", "E", WORKER, 700, "/usr/lib/python3.12/threading.py", 355),
    ev("main", "E", MAIN, 900, line=6), ev("<module>", "E", MAIN, 900, line=10),
]


def dump(events: list[dict]) -> str:
    return json.dumps(events, separators=(",", ":"))


def expected_rows() -> list[tuple]:
    m, w = "<module> (/srv/app.py:10)", "wait (/usr/lib/python3.12/threading.py:355)"
    return [
        (START + 100_000, 200_000, MAIN, f"{m};main (/srv/app.py:5);work (/srv/app.py:2)", False),
        (START + 150_000, 550_000, WORKER, w, True),
        (START + 300_000, 200_000, MAIN, f"{m};main (/srv/app.py:5);load (/srv/app.py:3)", False),
        (START + 500_000, 400_000, MAIN, f"{m};main (/srv/app.py:6)", False),
    ]


def rows(df) -> list[tuple]:
    return [(r.ts_ns, r.dur_ns, r.tid, r.stack, bool(r.idle)) for r in df.sort_values("ts_ns").itertuples()]


def test_replay(tmp_path) -> None:
    path = tmp_path / "pyspy.json"
    path.write_text(dump(EVENTS) + "\n")
    df = parse_pyspy(str(path), START)
    assert rows(df) == expected_rows()
    assert set(df["pid"]) == {4242}


def test_truncated_file_keeps_complete_events(tmp_path) -> None:
    text = dump(EVENTS)
    cut = text.index(f'"name":"main","ph":"E","pid":4242,"tid":{MAIN},"ts":900')  # inside the 11th event
    path = tmp_path / "pyspy.json"
    path.write_text(text[:cut])
    got = rows(parse_pyspy(str(path), START))
    # Everything up to the last complete event (ts 700); the open main-thread stack ends there.
    want = expected_rows()
    assert got[:3] == want[:3]
    assert got[3] == want[3][:1] + (200_000,) + want[3][2:]


def test_other_layout_and_escapes_fall_back(tmp_path) -> None:
    events = [dict(e) for e in EVENTS]
    events[0]["args"] = {"filename": 'C:\\srv\\app "x".py', "line": 10}
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(events, indent=1))  # pretty-printed: not py-spy's layout
    df = parse_pyspy(str(path), START)
    assert len(df) == 4 and df.sort_values("ts_ns")["stack"].iloc[0].startswith('<module> (C:\\srv\\app "x".py:10)')
    compact = tmp_path / "compact.json"
    compact.write_text(dump(events))  # py-spy's layout with an escaped quote
    assert rows(parse_pyspy(str(compact), START)) == rows(df)


def test_remapped_thread_ids(tmp_path) -> None:
    """Newer py-spy numbers threads 0, 1, ... and names the real id in thread_name metadata."""
    events = []
    for real, small in ((MAIN, 0), (WORKER, 1)):
        events.append({"args": {"filename": "", "line": None, "name": f"{real}: MainThread"}, "cat": "py-spy",
                       "name": "thread_name", "ph": "M", "pid": 4242, "tid": small, "ts": 0})
    for e in EVENTS:
        events.append(dict(e, tid=0 if e["tid"] == MAIN else 1))
    path = tmp_path / "pyspy.json"
    path.write_text(dump(events))
    assert rows(parse_pyspy(str(path), START)) == expected_rows()
    # and with the recorder's thread ident -> native id map
    df = parse_pyspy(str(path), START, tid_map={MAIN: 11, WORKER: 12})
    assert sorted(set(df["tid"])) == [11, 12]


def test_empty_and_garbage(tmp_path) -> None:
    for content in ("", "[", "[]", "not json at all"):
        path = tmp_path / "p.json"
        path.write_text(content)
        assert parse_pyspy(str(path), START).empty


def test_stacks_table_of_run(tmp_path) -> None:
    run = tmp_path / "run"
    (run / "raw").mkdir(parents=True)
    write_manifest(str(run), {"schema": SCHEMA, "start_ns": START - 10**9, "end_ns": START + 10**9,
                              "collectors": {"stacks": {"status": "ok", "start_ns": START}}})
    (run / "raw" / "pyspy.json").write_text(dump(EVENTS))
    (run / "raw" / "meta.4242.jsonl").write_text(json.dumps(
        {"ts_ns": START, "pid": 4242, "thread_ident": MAIN, "native_id": 4242}) + "\n")
    df = open_run(str(run)).table("stacks")
    assert len(df) == 4 and int(df["ts_ns"].iloc[0]) == START + 100_000
    assert set(df["tid"]) == {4242, WORKER}
    empty = tmp_path / "empty"
    empty.mkdir()
    write_manifest(str(empty), {"schema": SCHEMA, "start_ns": START})
    assert open_run(str(empty)).table("stacks").empty


SCRIPT = textwrap.dedent("""
    import threading, time

    def spin_inner():
        s = 0
        for i in range(20000):
            s += i
        return s

    def spin_outer(seconds):
        end = time.time() + seconds
        while time.time() < end:
            spin_inner()

    def waiter():
        threading.Event().wait(1.0)

    t = threading.Thread(target=waiter)
    t.start()
    spin_outer(1.2)
    t.join()
""")


def test_real_pyspy_recording(tmp_path) -> None:
    pyspy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(pyspy):
        pytest.skip("py-spy not installed")
    script = tmp_path / "busy.py"
    script.write_text(SCRIPT)
    out = tmp_path / "pyspy.json"
    start = time.time_ns()
    proc = subprocess.run([pyspy, "record", "-r", "100", "--idle", "-f", "chrometrace", "-o", str(out), "--",
                           sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not out.exists() or out.stat().st_size < 10:
        pytest.skip(f"py-spy cannot attach here: {proc.stderr.strip()[-200:]}")
    df = parse_pyspy(str(out), start)
    assert not df.empty
    assert (df["dur_ns"] > 0).all() and df["pid"].nunique() == 1
    # Times land on the run's clock: within the recording, which took less than 30 s.
    assert (df["ts_ns"] >= start).all() and (df["ts_ns"] + df["dur_ns"] <= start + 30 * 10**9).all()
    spin = df[df["stack"].str.contains("spin_inner")]
    assert not spin.empty
    first = spin["stack"].iloc[0].split(";")
    assert first[0].startswith("<module> (") and "busy.py" in first[0]
    assert first[-2].startswith("spin_outer (") and first[-1].startswith("spin_inner (")
    assert spin["dur_ns"].sum() > 0.3e9  # most of 1.2 s spinning
    waits = df[df["stack"].str.contains("waiter")]
    assert not waits.empty and waits["idle"].any()  # parked in threading's Event.wait


def test_forked_child_sharing_a_thread_id_keeps_its_own_stack(tmp_path) -> None:
    """py-spy --subprocesses diffs a forked worker's samples against its parent's last stack (same tid).

    What py-spy writes: each worker sample ends the parent's frames (E, never begun under the
    worker's pid) and begins the worker's whole stack from its `process N` root frame.
    """
    def e(name: str, ph: str, pid: int, ts: int, filename: str = "/srv/app.py", line: int = 1) -> dict:
        return {"args": {"filename": filename, "line": line}, "cat": "py-spy", "name": name, "ph": ph,
                "pid": pid, "tid": MAIN, "ts": ts}

    parent = [("process 10:\"python app.py\"", ""), ("<module>", "/srv/app.py"), ("wait", "/srv/app.py")]
    child = [("process 11:\"python app.py\"", ""), ("<module>", "/srv/app.py"), ("loop", "/srv/app.py"),
             ("decode", "/srv/app.py")]
    events = [e(n, "B", 10, 0, f, 0 if not f else 1) for n, f in parent]
    for k in range(1, 200):
        pid, now, prev = (11, child, parent) if k % 2 else (10, parent, child)
        events += [e(n, "E", pid, k * 100, f, 0 if not f else 1) for n, f in reversed(prev[1:])]
        events += [e(n, "B", pid, k * 100, f, 0 if not f else 1) for n, f in now]
    path = tmp_path / "pyspy.json"
    path.write_text(dump(events) + "\n")
    df = parse_pyspy(str(path), START)
    depth = df["stack"].str.count(";") + 1
    assert depth[df["pid"] == 11].max() == 4 and depth[df["pid"] == 10].max() == 3
    assert set(df.loc[df["pid"] == 11, "stack"]) == {
        'process 11:"python app.py" (:0);<module> (/srv/app.py:1);loop (/srv/app.py:1);decode (/srv/app.py:1)'}


def test_depth_is_capped(tmp_path) -> None:
    # B events that are never ended (a lost track): the stack is reset, not grown without bound
    events = [ev(f"f{i}", "B", MAIN, 100 + i) for i in range(3000)]
    path = tmp_path / "pyspy.json"
    path.write_text(dump(events) + "\n")
    df = parse_pyspy(str(path), START)
    assert (df["stack"].str.count(";") + 1).max() <= 1100
