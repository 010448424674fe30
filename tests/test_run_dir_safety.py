"""Issue 9, failures 1, 3, 6 and 12: run directories made atomically and privately,
diag's own output kept off the target's stdout, nothing left behind by a failure."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from diag.collect.profile import default_out, prepare_run_dir

DIAG = [sys.executable, "-m", "diag.cli"]
FAST = ["--no-stacks", "--no-gpu"]


def diag(*args: str, cwd: Path, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*DIAG, *args], capture_output=True, timeout=timeout, cwd=cwd, **kw)


def _target(tmp_path: Path) -> Path:
    """A tiny Python target that leaves a marker named after its pid in the folder its argument names."""
    script = tmp_path / "steps.py"
    script.write_text("import os, pathlib, sys, time\ntime.sleep(0.3)\n"
                      "pathlib.Path(sys.argv[1], str(os.getpid())).write_text('ran')\n")
    (tmp_path / "marks").mkdir()
    return script


@pytest.mark.parametrize("cmd,stem", [
    (["python", "serve.py", "--port", "8000"], "serve"),
    (["python3", "-u", "-W", "ignore", "app/serve.py", "--password", "hunter2"], "serve"),
    (["python", "-m", "http.server", "8000"], "http_server"),
    (["/usr/bin/python3.11", "-c", "print(1)"], "python3_11"),
    (["./run.sh", "--token", "abc"], "run"),
])
def test_default_name_comes_from_the_script_never_the_last_argument(cmd: list[str], stem: str) -> None:
    name = os.path.basename(default_out(cmd))
    assert name.endswith("-" + stem), name


def test_same_name_twice_gives_two_directories(tmp_path: Path) -> None:
    base = str(tmp_path / "diag-runs" / "20250101-000000-steps")
    first = prepare_run_dir(base, unique=True)
    second = prepare_run_dir(base, unique=True)
    assert first != second and os.path.isdir(first) and os.path.isdir(second)
    assert stat.S_IMODE(os.stat(first).st_mode) & 0o077 == 0  # private: 0700


def test_two_profiles_in_the_same_second_both_run_and_both_keep_their_run(tmp_path: Path) -> None:
    script = _target(tmp_path)
    # the same command twice: both want the same default name in the same second
    procs = [subprocess.Popen([*DIAG, "profile", "-q", *FAST, "--", sys.executable, str(script), "marks"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1].decode() for o in outs]
    marks = sorted(os.listdir(tmp_path / "marks"))
    assert len(marks) == 2
    runs = sorted((tmp_path / "diag-runs").iterdir())
    assert len(runs) == 2
    pids = set()
    for run in runs:
        m = json.loads((run / "run.json").read_text())
        assert m["partial"] is False and m["exit_code"] == 0
        pids.add(str(m["pid"]))
        assert not [f for f in os.listdir(run) if "write-test" in f or ".tmp" in f]
    assert pids == set(marks)


def test_a_symlink_planted_at_the_next_default_name_is_not_followed(tmp_path: Path) -> None:
    script = _target(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "diag-runs").mkdir()
    now = time.time()
    for dt in range(0, 6):  # the names of the next few seconds
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        for stem in ("steps", "marks"):  # the right name, and the one today's code picks
            os.symlink(victim, tmp_path / "diag-runs" / f"{stamp}-{stem}")
    r = diag("profile", "-q", *FAST, "--", sys.executable, str(script), "marks", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert os.listdir(victim) == []
    real = [p for p in (tmp_path / "diag-runs").iterdir() if not p.is_symlink()]
    assert len(real) == 1 and (real[0] / "run.json").is_file()


def test_an_explicit_empty_out_is_claimed_by_one_run_only(tmp_path: Path) -> None:
    from diag.collect.profile import claim_run_dir
    from diag.errors import DiagError

    out = str(tmp_path / "run")
    os.mkdir(out)
    first, second = prepare_run_dir(out), prepare_run_dir(out)  # both see an empty directory
    claim_run_dir(first, out, {"schema": "diag.run/1"})
    with pytest.raises(DiagError, match="another run"):
        claim_run_dir(second, out, {"schema": "diag.run/1"})
    assert os.listdir(out) == ["run.json"]


def test_explicit_out_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    os.symlink(victim, tmp_path / "run")
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", sys.executable, "-c", "pass", cwd=tmp_path)
    assert r.returncode != 0 and b"Traceback" not in r.stderr
    assert os.listdir(victim) == []


def test_diag_prints_nothing_on_the_targets_stdout(tmp_path: Path) -> None:
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", sys.executable, "-c", "print('data')",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"data\n"
    assert b"recorded" in r.stderr  # the summary went to stderr


def test_profile_json_goes_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "diagnosis.json"
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--json", str(out), "--",
             sys.executable, "-c", "print('data')", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == b"data\n"
    assert json.loads(out.read_text())["schema"] == "diag.diagnosis/1"


def test_report_respects_umask_and_run_dir_is_private(tmp_path: Path) -> None:
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "-q", "--html", "--",
             sys.executable, "-c", "pass", cwd=tmp_path, preexec_fn=lambda: os.umask(0o077))
    assert r.returncode == 0, r.stderr.decode()
    assert stat.S_IMODE(os.stat(tmp_path / "run").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "run" / "report.html").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "run" / "run.json").st_mode) == 0o600


def test_non_executable_target_leaves_no_run_dir(tmp_path: Path) -> None:
    script = tmp_path / "notexec.sh"
    script.write_text("echo hi\n")
    r = diag("profile", "--out", str(tmp_path / "run"), *FAST, "--", str(script), cwd=tmp_path)
    assert r.returncode == 126
    assert len(r.stderr.decode().strip().splitlines()) == 1 and b"Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()
    r = diag("profile", *FAST, "--", str(script), cwd=tmp_path)
    assert r.returncode == 126 and not (tmp_path / "diag-runs").exists()


def test_run_kept_in_is_not_said_of_a_deleted_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = f"import shutil; shutil.rmtree({str(run)!r})"
    r = diag("profile", "--out", str(run), *FAST, "--", sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 0
    assert b"run kept in" not in r.stderr
    assert b"Traceback" not in r.stderr


def test_failed_manifest_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import resource
        from diag.store.manifest import write_manifest
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        try:
            write_manifest({str(tmp_path)!r}, {{"schema": "diag.run/1", "pad": "x" * 100000}})
        except OSError as exc:
            print("failed", exc.errno)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "failed" in r.stdout, r.stderr
    assert os.listdir(tmp_path) == []
