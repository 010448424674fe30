"""Stack sampler: py-spy on a real Python child, missing py-spy, non-Python targets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
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


# -- adaptive rate (issue 10): pure decision, load window, and what run.json records ----------------

FAKE_PY_SPY = """#!{python}
import json, signal, sys, time
args = sys.argv[1:]
with open({calls!r}, "a") as f:
    f.write(json.dumps(args) + "\\n")
out = args[args.index("-o") + 1]
def finish(*_):
    with open(out, "w") as f:
        f.write("[]")
    sys.exit(0)
signal.signal(signal.SIGINT, finish)
while True:
    time.sleep(0.05)
"""


class FakeLoad(stack_sampler.IdleCpu):
    """Idle cores as the test says, whatever the machine does."""

    def __init__(self, spare: list[float], cores: int = 2) -> None:
        super().__init__(cores=cores)
        self.spare = spare

    def read(self, now: float) -> None:
        pass

    def spare_cores(self) -> float | None:
        return self.spare.pop(0) if len(self.spare) > 1 else self.spare[0]


def _fake_py_spy(tmp_path):
    calls = tmp_path / "calls.jsonl"
    exe = tmp_path / "py-spy"
    exe.write_text(FAKE_PY_SPY.format(python=sys.executable, calls=str(calls)))
    exe.chmod(0o755)
    return str(exe), calls


def _rates_asked(calls):
    return [int(a[a.index("-r") + 1]) for a in map(json.loads, calls.read_text().splitlines())]


def test_rate_drops_on_a_saturated_small_host():
    rate, why = stack_sampler.choose_rate(cores=2, spare_cores=0.05, base_hz=50, current_hz=50)
    assert rate == stack_sampler.SATURATED_RATE_HZ and "0.05 of 2 cores idle" in why
    # already low: nothing to do
    assert stack_sampler.choose_rate(2, 0.05, 50, stack_sampler.SATURATED_RATE_HZ) == (10, None)
    # 4 cores, all busy: still a small host
    assert stack_sampler.choose_rate(4, 0.1, 50, 50)[0] == stack_sampler.SATURATED_RATE_HZ


def test_rate_kept_with_a_spare_core_or_many_cores():
    assert stack_sampler.choose_rate(2, 1.0, 50, 50) == (50, None)  # a core to spare: py-spy runs there
    assert stack_sampler.choose_rate(8, 0.0, 100, 100) == (100, None)  # big host: one core of many
    assert stack_sampler.choose_rate(2, 0.0, 5, 5) == (5, None)  # the base is already lower


def test_rate_goes_back_up_only_with_clearly_free_cores():
    low = stack_sampler.SATURATED_RATE_HZ
    assert stack_sampler.choose_rate(2, 0.5, 50, low) == (low, None)  # between the thresholds: hold
    rate, why = stack_sampler.choose_rate(2, 0.9, 50, low)
    assert rate == 50 and "back to 50 Hz" in why


def test_rate_scaled_to_py_spys_own_budget_on_a_small_host():
    # a core idle on average, but py-spy takes 0.17 of a core (a thread per request): its budget is 2% of 2 cores
    rate, why = stack_sampler.choose_rate(2, 0.6, 50, 50, own_cores=0.17)
    assert rate == stack_sampler.SATURATED_RATE_HZ and "over its budget of 0.040" in why  # 11.8 Hz would fit: the 10 Hz rung
    assert stack_sampler.choose_rate(2, 0.6, 50, 50, own_cores=0.09)[0] == 20  # 22 Hz would fit: the 20 Hz rung
    assert stack_sampler.choose_rate(2, 0.6, 50, 50, own_cores=0.03) == (50, None)  # within budget
    assert stack_sampler.choose_rate(2, 0.6, 50, 50, own_cores=1.0)[0] == stack_sampler.SATURATED_RATE_HZ  # floor
    assert stack_sampler.choose_rate(16, 0.6, 100, 100, own_cores=1.0) == (100, None)  # big host: not taken from it
    # back up only where py-spy at the base rate would fit its budget
    assert stack_sampler.choose_rate(2, 1.5, 50, 10, own_cores=0.035) == (10, None)
    assert stack_sampler.choose_rate(2, 1.5, 50, 10, own_cores=0.005)[0] == 50


def test_saturated_host_restarts_py_spy_lower_and_says_so(tmp_path):
    exe, calls = _fake_py_spy(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        s = StackSampler(rate_hz=50, py_spy=exe, adaptive=True, load=FakeLoad([1.0, 0.02]))
        s.start(str(tmp_path), child.pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(s.status()["rates"]) < 2:
            time.sleep(0.1)
        time.sleep(0.5)
        s.stop()
    finally:
        child.kill()
        child.wait()
    st = s.status()
    assert st["status"] == "ok" and st["adaptive"] is True and st["rate_hz"] == 50
    assert [r["rate_hz"] for r in st["rates"]] == [50, stack_sampler.SATURATED_RATE_HZ]
    assert st["rates"][1]["spare_cores"] == 0.02 and "idle" in st["rates"][1]["why"]
    assert _rates_asked(calls) == [50, stack_sampler.SATURATED_RATE_HZ]  # py-spy restarted at the new rate
    assert len(list((tmp_path / "raw").glob("pyspy.*.json"))) == 2  # short segment left as JSON, both read


def _py_spy_calls_on(tmp_path, argv, wait_s=1.5, settle_s=0.0, calls_wanted=1):
    """StackSampler (fake py-spy) on the process tree `argv` starts; per py-spy started, whether it
    followed subprocesses; and the sampler's status."""
    exe, calls = _fake_py_spy(tmp_path)
    target = subprocess.Popen(argv)
    try:
        time.sleep(settle_s)
        s = StackSampler(rate_hz=50, py_spy=exe)
        s.start(str(tmp_path), target.pid)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and (not calls.exists() or len(calls.read_text().splitlines()) < calls_wanted):
            time.sleep(0.1)
        s.stop()
        for child in psutil.Process(target.pid).children(recursive=True):
            child.kill()
    finally:
        target.kill()
        target.wait()
    return ["--subprocesses" in a for a in map(json.loads, calls.read_text().splitlines())], s.status()


def test_subprocesses_followed_once_the_target_has_a_child(tmp_path):
    code = ("import subprocess, sys, time; time.sleep(1.5); "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)")
    asked, status = _py_spy_calls_on(tmp_path, [sys.executable, "-c", code], wait_s=10, calls_wanted=2)
    assert asked == [False, True]  # alone at first; restarted to follow the child
    assert 1.0 <= status["subprocesses_at_s"] <= 5.0


def test_subprocesses_followed_from_the_start_under_a_launcher(tmp_path):
    argv = ["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(30)'; true"]
    # calls_wanted=2: watch the whole 1.5 s, so a second (restarted) py-spy would show
    asked, _ = _py_spy_calls_on(tmp_path, argv, settle_s=0.5, calls_wanted=2)  # the shell has started its child
    assert asked == [True]


def test_a_rate_the_user_gave_is_kept(tmp_path):
    exe, calls = _fake_py_spy(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        s = StackSampler(rate_hz=50, py_spy=exe, adaptive=False, load=FakeLoad([0.0]))
        s.start(str(tmp_path), child.pid)
        time.sleep(1.5)
        s.stop()
    finally:
        child.kill()
        child.wait()
    assert "rates" not in s.status() and _rates_asked(calls) == [50]


def test_run_json_records_the_rates(tmp_path, monkeypatch):
    from diag.collect import profile

    exe, _ = _fake_py_spy(tmp_path)
    monkeypatch.setattr(stack_sampler, "find_py_spy", lambda: exe)
    monkeypatch.setattr(stack_sampler, "IdleCpu", lambda: FakeLoad([0.0], cores=2))
    monkeypatch.setattr(profile, "default_stack_rate", lambda: 50)
    opts = profile.ProfileOptions(out=str(tmp_path / "run"), gpu=False, hooks=False)
    rec = profile.record([sys.executable, "-c", "import time; time.sleep(2.5)"], opts)
    with open(os.path.join(rec.run_dir, "run.json")) as f:
        stacks = json.load(f)["collectors"]["stacks"]
    assert stacks["adaptive"] is True
    assert [r["rate_hz"] for r in stacks["rates"]] == [50, stack_sampler.SATURATED_RATE_HZ]
    assert stacks["rates"][0]["why"].startswith("start: 2 cores")
