"""Loss is never silent (issue 9, failure 4): the recorder counts the rows it could not write,
leaves an end record per process, and sealing flags what is missing (dropped rows, gaps in
the step sequence, processes that left without their end record) in run.json and the verdict."""

from __future__ import annotations

import errno
import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hooks_support import make_run_dir, target_env, write_script

from diag.collect.recorder import Recorder
from diag.store import jsonl
from diag.store.jsonl import JsonlWriter
from diag.store.manifest import read_manifest
from diag.store.run import open_run, seal

# A target that makes N steps through the recorder's own lifecycle (the path every hook takes).
STEPS = """
import os, sys, time
rec = sys.modules["_diag_rec.collect.recorder"].active_recorder()

def steps(n, period=0.0):
    for _ in range(n):
        row = rec.begin_step("fake")
        if period:
            time.sleep(period)
        rec.end_step(row)
"""


def _run(tmp_path: Path, body: str, options: dict[str, Any] | None = None,
         fsize: int | None = None) -> tuple[Path, subprocess.CompletedProcess[str]]:
    run_dir = make_run_dir(tmp_path)
    script = write_script(tmp_path, STEPS + body)

    def limit() -> None:
        if fsize is not None:  # CI runs as root: a file-size limit, not permissions, makes writes fail
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    proc = subprocess.run([sys.executable, str(script)], env=target_env(run_dir, options), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, preexec_fn=limit)
    return run_dir, proc


def _ends(run_dir: Path) -> dict[int, dict[str, Any]]:
    raw = run_dir / "raw"
    return {int(p.name.split(".")[1]): json.loads(p.read_text()) for p in raw.glob("end.*.json")}


def _recorder(tmp_path: Path, **options: Any) -> Recorder:
    (tmp_path / "run.json").write_text(json.dumps({"schema": "diag.run/1", "start_ns": 0, "partial": False,
                                                   "collectors": {"hooks": {"status": "ok"}}}))
    return Recorder(str(tmp_path), {"gc": False, **options})


def _steps(rec: Recorder, n: int) -> None:
    for _ in range(n):
        rec.end_step(rec.begin_step("fake"))


# -- the file-size limit repro: 71 462 steps made, 9 201 recorded, hooks 'ok' -------------------------

def test_file_size_limit_is_counted_and_flagged(tmp_path: Path) -> None:
    run_dir, proc = _run(tmp_path, "steps(30000)\n", fsize=256 * 1024)
    assert proc.returncode == 0, proc.stderr
    (pid, end), = _ends(run_dir).items()
    assert end["steps"] == 30000
    assert end["rows"]["steps"]["dropped"] > 0
    assert end["errors"]["steps"].startswith("EFBIG")
    recorded = len(open_run(str(run_dir)).table("steps"))
    assert end["rows"]["steps"]["written"] == recorded < 30000

    loss = seal(str(run_dir))
    m = read_manifest(str(run_dir))
    assert loss is not None and m["loss"]["steps_lost"] == 30000 - recorded
    assert m["loss"]["steps_seen"] == 30000
    assert m["partial"] is True
    hooks = m["collectors"]["hooks"]
    assert hooks["status"] == "degraded"
    assert "file size limit" in hooks["reason"]
    assert f"{30000 - recorded:,} of 30,000 steps lost".replace(",", " ") in hooks["reason"]


def test_a_clean_run_is_not_flagged(tmp_path: Path) -> None:
    run_dir, proc = _run(tmp_path, "steps(3000)\n", options={"table_rows": 200})  # sampled: gaps explained
    assert proc.returncode == 0, proc.stderr
    (_, end), = _ends(run_dir).items()
    assert end["steps"] == 3000 and end["rows"]["steps"]["dropped"] == 0 and not end["errors"]
    assert seal(str(run_dir)) is None
    m = read_manifest(str(run_dir))
    assert "loss" not in m and not m.get("partial")


# -- rows that cannot be saved: detected afterwards ------------------------------------------------------

@pytest.mark.parametrize("leave", ["os._exit(0)", "import ctypes; ctypes.string_at(0)"])
def test_leaving_without_cleanup_is_flagged(tmp_path: Path, leave: str) -> None:
    run_dir, proc = _run(tmp_path, f"steps(200, 0.002)\n{leave}\n")
    assert proc.returncode in (0, -11)
    assert _ends(run_dir) == {}  # nothing could run at exit: the missing end record is the signal
    seal(str(run_dir))
    m = read_manifest(str(run_dir))
    assert m["partial"] is True and m["collectors"]["hooks"]["status"] == "degraded"
    assert "without its end record" in m["collectors"]["hooks"]["reason"]
    assert m["loss"]["no_end"] == [int(p.name.split(".")[1]) for p in (run_dir / "raw").glob("meta.*.jsonl")]
    # rows are flushed often while a process is young: most of a short life is kept
    assert len(open_run(str(run_dir)).table("steps")) >= 100


def test_forked_child_leaving_with_os_exit_keeps_its_rows(tmp_path: Path) -> None:
    run_dir, proc = _run(tmp_path, """
steps(10)
pid = os.fork()
if pid == 0:
    steps(150, 0.002)
    os._exit(0)
os.waitpid(pid, 0)
print(pid)
""")
    assert proc.returncode == 0, proc.stderr
    child = int(proc.stdout.split()[-1])
    run = open_run(str(run_dir))
    steps = run.table("steps")
    kept = int((steps["pid"] == child).sum())
    assert kept >= 100, kept  # a young child's flusher runs often; before, all 150 were lost
    seal(str(run_dir))
    m = read_manifest(str(run_dir))
    assert m["loss"]["no_end"] == [child]  # the parent left through atexit: its end record is there
    assert m["partial"] is True


def test_gaps_in_the_step_sequence_are_loss(tmp_path: Path) -> None:
    rec = _recorder(tmp_path, table_rows=100)
    _steps(rec, 1000)  # 100 kept in full, then 1 in 2, 1 in 4...: those gaps are explained
    rec.close()
    assert seal(str(tmp_path)) is None
    raw = tmp_path / "raw"
    path = raw / f"steps.{os.getpid()}.jsonl"
    lines = path.read_text().splitlines()
    del lines[50:60]  # ten steps kept in full, gone
    path.write_text("\n".join(lines) + "\n")
    for p in tmp_path.glob("*.parquet"):
        p.unlink()
    loss = seal(str(tmp_path))
    assert loss is not None and loss["steps_lost"] == 10 and loss["steps_seen"] == 1000
    m = read_manifest(str(tmp_path))
    assert m["collectors"]["hooks"]["status"] == "degraded" and m["partial"] is True


# -- the writer: counts, no retry storm, no symlink followed ---------------------------------------------

def test_write_errors_are_counted_without_a_retry_storm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = JsonlWriter(str(tmp_path), "steps")
    calls = []

    def full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonl.os, "write", full)
    for _ in range(100):
        w.write_lines(['{"a":1}', '{"a":2}'])
    assert len(calls) == 1
    assert w.dropped == 200 and w.written == 0 and w.error.startswith("ENOSPC")


def test_a_short_write_counts_whole_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = JsonlWriter(str(tmp_path), "steps")
    real = os.write
    budget = [12]  # the file-size limit: 12 bytes, then EFBIG

    def limited(fd: int, data: bytes) -> int:
        if budget[0] <= 0:
            raise OSError(errno.EFBIG, "File too large")
        n = real(fd, data[:budget[0]])
        budget[0] -= n
        return n

    monkeypatch.setattr(jsonl.os, "write", limited)
    w.write_lines(['{"a":1}', '{"a":2}', '{"a":3}'])  # 8 bytes a line: one whole line fits
    assert (w.written, w.dropped) == (1, 2) and w.error.startswith("EFBIG")


def test_unwritable_raw_files_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _recorder(tmp_path)
    real_open = os.open

    def refuse(path: str, flags: int, mode: int = 0o777, **kw: Any) -> int:
        if os.path.basename(str(path)).startswith("steps."):  # an immutable dir, as root: EPERM
            raise PermissionError(errno.EPERM, "Operation not permitted", path)
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(jsonl.os, "open", refuse)
    _steps(rec, 500)
    rec.flush()
    rec.flush()
    rec.close()
    end = _ends(tmp_path)[os.getpid()]
    assert end["rows"]["steps"] == {"written": 0, "dropped": 500}
    assert end["errors"]["steps"].startswith("EPERM")
    loss = seal(str(tmp_path))
    assert loss is not None and loss["steps_lost"] == 500
    assert "permission denied" in read_manifest(str(tmp_path))["collectors"]["hooks"]["reason"]


def test_a_planted_symlink_receives_nothing(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("")
    raw = tmp_path / "run" / "raw"
    raw.mkdir(parents=True)
    (raw / f"steps.{os.getpid()}.jsonl").symlink_to(victim)
    rec = _recorder(tmp_path / "run")
    _steps(rec, 100)
    rec.close()
    assert victim.read_text() == ""
    end = _ends(tmp_path / "run")[os.getpid()]
    assert end["rows"]["steps"]["dropped"] == 100 and end["errors"]["steps"].startswith("ELOOP")
    for p in raw.iterdir():
        if not p.is_symlink():
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


# -- the verdict says what it rests on -------------------------------------------------------------------

def test_partial_run_verdict_says_what_it_rests_on(tmp_path: Path) -> None:
    import analysis_fixtures as F

    from diag.engine.diagnose import diagnose

    b = F.RunBuilder(str(tmp_path / "run"))
    F._loop(b, 0.010, 0.95)
    b.manifest_extra = {"partial": True, "loss": {
        "steps_seen": 20000, "steps_lost": 17400, "recorded_until_ns": F.ns(3.0), "no_end": [],
        "reason": "17 400 of 20 000 steps lost (file size limit)"}}
    d = diagnose(b.write())
    top = d.findings[0]
    assert top.rule == "run.partial" and top.severity == "high"
    assert "rests on" in top.title and "87%" in top.title and "file size limit" in top.title


def test_profile_under_a_file_size_limit_says_so(tmp_path: Path) -> None:
    """The repro end to end: `ulimit -f` around `diag profile`; run.json, the console and the JSON verdict say it."""
    script = write_script(tmp_path, STEPS + "steps(30000)\n")
    out, verdict = tmp_path / "run", tmp_path / "verdict.json"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, 512 * 1024))

    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAG_")}
    proc = subprocess.run([sys.executable, "-m", "diag", "profile", "--out", str(out), "--no-stacks", "--no-gpu",
                           "--json", str(verdict), "--", sys.executable, str(script)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr
    m = read_manifest(str(out))
    assert m["partial"] is True and m["collectors"]["hooks"]["status"] == "degraded"
    assert "of 30 000 steps lost (file size limit)" in m["collectors"]["hooks"]["reason"]
    assert "degraded" in proc.stderr and "file size limit" in proc.stderr
    d = json.loads(verdict.read_text())
    assert d["run"]["partial"] is True
    assert d["findings"][0]["rule"] == "run.partial" and "rests on" in d["findings"][0]["title"]
