"""Host sampler on a real process tree: every pid, thread rows, I/O counters, system rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from diag.collect.host_sampler import HostSampler, ProcessTree
from diag.store.jsonl import read_jsonl

# A parent with: a spinning thread, a multiprocessing pool of two spinning
# workers, a subprocess that writes 4 MiB to a file, and a child that starts a
# grandchild and exits (the grandchild is re-parented but is still the target's).
TREE = r"""
import json, multiprocessing as mp, os, subprocess, sys, threading, time

def spin(secs):
    end = time.time() + secs
    x = 0
    while time.time() < end:
        x += 1
    return os.getpid()

if __name__ == "__main__":
    out = sys.argv[1]
    t = threading.Thread(target=spin, args=(1.2,))
    t.start()
    writer = subprocess.Popen([sys.executable, "-c",
        "import os, time\n"
        "with open(os.path.join(%r, 'blob'), 'wb') as f:\n"
        "    for _ in range(64): f.write(b'x' * 65536)\n"
        "time.sleep(1.0)\n" % os.path.dirname(out)])
    orphaner = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1.6)'])\n"
        "print(g.pid, flush=True)\n"
        "time.sleep(0.4)\n"], stdout=subprocess.PIPE, text=True)
    grandchild = int(orphaner.stdout.readline())
    with mp.Pool(2) as pool:
        workers = pool.map(spin, [0.8, 0.8])
    t.join()
    writer.wait()
    orphaner.wait()
    with open(out, "w") as f:
        json.dump({"workers": workers, "writer": writer.pid, "orphaner": orphaner.pid,
                   "grandchild": grandchild, "spin_thread": t.native_id}, f)
    time.sleep(0.5)  # the grandchild outlives its parent
"""


def _rows(run_dir, table):
    rows = []
    for f in sorted((run_dir / "raw").glob(f"{table}.*.jsonl")):
        rows += read_jsonl(str(f))
    return rows


def test_whole_tree(tmp_path):
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    pids_file = tmp_path / "pids.json"
    bystander = subprocess.Popen(["sleep", "5"])  # not in the tree: must not be sampled
    root = subprocess.Popen([sys.executable, str(script), str(pids_file)])
    s = HostSampler(interval_s=0.1)
    s.start(str(tmp_path), root.pid)
    root.wait(30)
    s.stop()
    bystander.kill()
    bystander.wait()
    assert root.returncode == 0
    pids = json.loads(pids_file.read_text())

    st = s.status()
    assert st["status"] == "ok" and st["samples"] >= 10 and st["cpu_s"] > 0

    host = _rows(tmp_path, "host")
    by_pid: dict[int, list[dict]] = {}
    for r in host:
        by_pid.setdefault(r["pid"], []).append(r)
    expected = {root.pid, pids["writer"], pids["orphaner"], pids["grandchild"], *pids["workers"]}
    assert expected <= set(by_pid), (expected - set(by_pid))
    assert bystander.pid not in by_pid
    assert by_pid[pids["writer"]][0]["ppid"] == root.pid
    assert all(by_pid[w][0]["ppid"] == root.pid for w in pids["workers"])

    # the grandchild is still sampled after its parent exited
    orphaner_last = by_pid[pids["orphaner"]][-1]["ts_ns"]
    assert by_pid[pids["grandchild"]][-1]["ts_ns"] > orphaner_last

    # columns as docs/run-format.md
    cols = {"ts_ns", "pid", "ppid", "name", "cpu_pct", "rss_bytes", "read_bytes", "write_bytes",
            "read_chars", "write_chars", "ctx_vol", "ctx_invol", "num_threads", "iowait_s"}
    assert all(set(r) == cols for r in host)

    # busy pool workers use CPU (how much depends on what else this shared machine runs);
    # the sleeping grandchild does not; the writer's 4 MiB are in write_chars
    for w in pids["workers"]:
        assert max(r["cpu_pct"] or 0 for r in by_pid[w]) > 5
    assert all(r["cpu_pct"] < 5 for r in by_pid[pids["grandchild"]][-3:])  # past its start-up
    assert by_pid[pids["writer"]][-1]["write_chars"] >= 4 * 2**20
    assert all(r["rss_bytes"] > 1_000_000 for r in by_pid[root.pid])  # exited (zombie) rows are skipped
    assert by_pid[root.pid][-1]["num_threads"] >= 1

    # per-thread rows: the root's spinning thread is there with its CPU seconds
    threads = _rows(tmp_path, "threads")
    assert all(set(r) == {"ts_ns", "pid", "tid", "user_s", "system_s", "run_delay_s"} for r in threads)
    assert all(r["run_delay_s"] is None or r["run_delay_s"] >= 0 for r in threads)
    cpu_by_tid: dict[int, float] = {}
    for r in threads:
        if r["pid"] == root.pid:
            cpu_by_tid[r["tid"]] = r["user_s"] + r["system_s"]
    # the spinning thread is the root's busiest: what analysis uses to find the step thread
    assert max(cpu_by_tid, key=cpu_by_tid.get) == pids["spin_thread"]
    assert cpu_by_tid[pids["spin_thread"]] >= 0.05
    # rows only when a thread's CPU time changed: no two identical rows in a row
    last: dict[tuple[int, int], tuple[float, float]] = {}
    for r in threads:
        key, cpu = (r["pid"], r["tid"]), (r["user_s"], r["system_s"])
        assert last.get(key) != cpu
        last[key] = cpu

    system = _rows(tmp_path, "system")
    assert len(system) >= 10
    for r in system:
        assert set(r) == {"ts_ns", "cpu_pct", "iowait_pct", "mem_used_bytes", "mem_total_bytes"}
        assert 0 <= r["cpu_pct"] <= 100 and 0 < r["mem_used_bytes"] < r["mem_total_bytes"]
    assert max(r["cpu_pct"] for r in system) > 10  # busy workers on this machine


def test_rows_reach_disk_while_running(tmp_path):
    """Rows are appended as the run goes (a SIGKILLed diag still leaves them)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    s = HostSampler(interval_s=0.05)
    s.start(str(tmp_path), child.pid)
    time.sleep(1.2)
    on_disk = _rows(tmp_path, "host")  # before stop(): only what batches already wrote
    s.stop()
    child.kill()
    child.wait()
    assert len(on_disk) >= 5


def test_missing_root_is_unavailable(tmp_path):
    p = subprocess.Popen(["true"])
    p.wait()
    s = HostSampler()
    s.start(str(tmp_path), p.pid)
    s.stop()
    assert s.status()["status"] == "unavailable"


def test_process_tree_ignores_others():
    me = os.getpid()
    tree = ProcessTree(me)
    other = subprocess.Popen(["sleep", "2"])  # my child: in my tree
    assert other.pid in tree.scan()
    assert ProcessTree(other.pid).scan() == {other.pid}
    other.kill()
    other.wait()
    time.sleep(0.05)
    assert other.pid not in tree.scan()
