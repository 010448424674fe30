"""Stack sampler: py-spy on a real Python child, missing py-spy, non-Python targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from diag.collect import stack_sampler
from diag.collect.stack_sampler import StackSampler, find_py_spy

WORK = """
import time
def spin_here():
    x = 0
    for i in range(200000):
        x += i
    return x
end = time.time() + {secs}
while time.time() < end:
    spin_here()
"""


def _trace(run_dir):
    (path,) = (run_dir / "raw").glob("pyspy.*.json")
    with open(path) as f:
        return json.load(f)


def _skip_if_no_attach(st):
    if st["status"] != "ok" and "no Python" not in st.get("reason", ""):
        pytest.skip(f"py-spy cannot attach here: {st.get('reason')}")


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy not installed")
def test_records_a_python_child(tmp_path, capfd):
    child = subprocess.Popen([sys.executable, "-c", WORK.format(secs=5)])
    try:
        s = StackSampler(rate_hz=100)
        t0 = time.time_ns()
        s.start(str(tmp_path), child.pid)
        time.sleep(1.5)
        s.stop()
        t1 = time.time_ns()
    finally:
        child.kill()
        child.wait()
    st = s.status()
    _skip_if_no_attach(st)
    assert st["status"] == "ok", st
    assert st["rate_hz"] == 100 and t0 <= st["start_ns"] <= t1
    events = _trace(tmp_path)
    ours = [e for e in events if e.get("pid") == child.pid]
    assert any(e["name"] == "spin_here" for e in ours)
    # timestamps are µs from py-spy's start: with start_ns they land inside the sampling window
    ts = [st["start_ns"] + int(e["ts"] * 1000) for e in ours]
    assert t0 <= min(ts) and max(ts) <= t1 + 10**9
    # py-spy said nothing on the user's terminal; its messages are in the log
    out, err = capfd.readouterr()
    assert "py-spy" not in out + err
    assert "Sampling process" in (tmp_path / "raw" / "pyspy.log").read_text()
    assert st["cpu_s"] >= 0


def test_missing_py_spy(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_py_spy() is None
    s = StackSampler()
    s.start(str(tmp_path), 1)
    s.stop()
    assert s.status() == {"status": "unavailable", "reason": "py-spy not installed", "rate_hz": 100}


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy not installed")
def test_non_python_target(tmp_path, capfd):
    child = subprocess.Popen(["sleep", "1.5"])
    s = StackSampler()
    s.start(str(tmp_path), child.pid)
    child.wait()
    time.sleep(1.0)  # py-spy gives up after about a second
    s.stop()
    st = s.status()
    assert st["status"] == "unavailable", st
    assert "no Python process" in st["reason"]
    out, err = capfd.readouterr()
    assert out + err == ""


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy not installed")
def test_python_started_late_by_a_shell(tmp_path, monkeypatch):
    """A wrapper that waits (no child, so py-spy gives up) and then execs Python: attaching is retried."""
    monkeypatch.setattr(stack_sampler, "_RETRY_MAX_S", 1.0)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # `read -t` on a FIFO opened read-write waits without a child process
    script = f"read -t 1.5 x <> {fifo}; exec {sys.executable} -c '{WORK.format(secs=2)}'"
    child = subprocess.Popen(["bash", "-c", script])
    s = StackSampler()
    s.start(str(tmp_path), child.pid)
    child.wait()
    s.stop()
    st = s.status()
    _skip_if_no_attach(st)
    assert st["status"] == "ok", st
    assert st["attempts"] >= 2
    assert any(e["name"] == "spin_here" for e in _trace(tmp_path))


@pytest.mark.skipif(find_py_spy() is None, reason="py-spy not installed")
def test_segments_rotate_and_compact_so_long_runs_stay_bounded(tmp_path):
    """py-spy holds its samples in memory: it is restarted every rotate_s and each segment compacted."""
    from diag.store.manifest import write_manifest
    from diag.store.run import open_run

    child = subprocess.Popen([sys.executable, "-c", WORK.format(secs=4.0)])
    write_manifest(str(tmp_path), {"schema": "diag.run/1", "start_ns": time.time_ns()})
    s = StackSampler(rotate_s=1.2)
    s.start(str(tmp_path), child.pid)
    child.wait()
    s.stop()
    st = s.status()
    _skip_if_no_attach(st)
    assert st["segments"] >= 3, st
    deadline = time.monotonic() + 30  # compaction runs in niced subprocesses
    while time.monotonic() < deadline and not list((tmp_path / "raw").glob("stacks.*.parquet")):
        time.sleep(0.2)
    assert list((tmp_path / "raw").glob("stacks.*.parquet")), os.listdir(tmp_path / "raw")
    stacks = open_run(str(tmp_path)).table("stacks")
    ours = stacks[stacks["pid"] == child.pid]
    assert ours["stack"].str.contains("spin_here").any()
    span_s = (ours["ts_ns"].max() - ours["ts_ns"].min()) / 1e9
    assert span_s > 2.5  # samples from more than one segment
