"""The bootstrap sitecustomize and the recorder, through real Python processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from hooks_support import BOOTSTRAP, details, make_run_dir, run_target, target_env, write_script

from diag.collect.recorder import Recorder
from diag.store.jsonl import read_jsonl
from diag.store.run import open_run

USER_SITE = """
import os
os.environ["USER_SITECUSTOMIZE_RAN"] = "yes"
"""


def test_user_sitecustomize_still_runs(tmp_path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text(USER_SITE)
    code = """
        import os, sys
        print(os.environ.get("USER_SITECUSTOMIZE_RAN"), sys.modules["sitecustomize"].__file__)
    """
    run, proc = run_target(tmp_path, code, extra_path=[str(site)])
    assert proc.returncode == 0, proc.stderr
    ran, file = proc.stdout.split()
    assert ran == "yes" and file == str(site / "sitecustomize.py")
    assert not run.table("events").empty  # and diag recorded too
    # Without DIAG_RUN_DIR (our directory left on PYTHONPATH): nothing recorded, theirs still runs.
    script = write_script(tmp_path, code, "plain.py")
    plain = subprocess.run([sys.executable, str(script)], env=target_env(None, extra_path=[str(site)]),
                           capture_output=True, text=True, timeout=60)
    assert plain.stdout.split()[0] == "yes", plain.stderr


def test_failing_user_sitecustomize_behaves_as_without_diag(tmp_path) -> None:
    site = tmp_path / "usersite"
    site.mkdir()
    (site / "sitecustomize.py").write_text("raise ValueError('user bug')\n")
    run, proc = run_target(tmp_path, "print('target ran')", extra_path=[str(site)])
    assert proc.returncode == 0 and proc.stdout.strip() == "target ran"
    assert "Error in sitecustomize" in proc.stderr and "user bug" in proc.stderr  # as Python itself reports it


def test_target_that_never_imports_torch(tmp_path) -> None:
    code = """
        import sys, time
        import diag
        with diag.stage("work"):
            sum(range(1000))
        print(sorted(m for m in ("torch", "onnxruntime", "nvtx", "numpy") if m in sys.modules))
    """
    run, proc = run_target(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"  # diag loaded none of them
    ev = run.table("events")
    assert set(ev["kind"]) <= {"process_start", "gc"} and "process_start" in set(ev["kind"])
    (start,) = details(ev, "process_start")
    start_ts = int(ev[ev["kind"] == "process_start"]["ts_ns"].iloc[0])
    assert abs(start_ts - run.start_ns) < 30 * 10**9 and start["ppid"] == os.getpid()
    assert run.table("steps").empty
    assert list(run.table("ranges")["name"]) == ["work"]


def test_import_hygiene() -> None:
    """The recording side (every module of diag.collect) never loads pandas, plotly, textual or pyarrow."""
    code = (
        "import importlib, pkgutil, sys, diag, diag.api, diag.collect\n"
        "for m in pkgutil.walk_packages(diag.collect.__path__, 'diag.collect.'):\n"
        "    if not m.name.endswith('sitecustomize'):\n"
        "        importlib.import_module(m.name)\n"
        "import torch, nvtx\n"
        "torch.nn.Linear(2, 2)(torch.ones(1, 2))\n"
        "print(sorted(m for m in ('pandas', 'plotly', 'textual', 'pyarrow') if m in sys.modules))\n"
    )
    env = target_env(None)
    env["DIAG_RUN_DIR"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"diag-hygiene-{os.getpid()}")
    try:
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(env["DIAG_RUN_DIR"], ignore_errors=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_other_interpreter_records_too(tmp_path) -> None:
    """The bootstrap loads diag's recorder from its own files: no need for diag in the target's environment."""
    other = shutil.which("python3", path="/usr/bin:/bin")
    if not other or subprocess.run([other, "-c", "import diag"], capture_output=True, cwd=tmp_path).returncode == 0:
        pytest.skip("no interpreter without diag installed")
    run, proc = run_target(tmp_path, "import sys; print(sys.version)", python=other)
    assert proc.returncode == 0, proc.stderr
    meta = [r for p in os.listdir(os.path.join(run.path, "raw")) if p.startswith("meta.")
            for r in read_jsonl(os.path.join(run.path, "raw", p))]
    assert meta and meta[0]["python"] == proc.stdout.split()[0]


def test_bad_run_dir_and_options_never_hurt_the_target(tmp_path) -> None:
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    script = write_script(tmp_path, "import diag\nwith diag.request():\n    pass\nprint('ok')\n")
    env = target_env(None)
    env.update(DIAG_RUN_DIR=str(blocker / "run"), DIAG_OPTIONS="{not json")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok" and proc.stderr == ""
    # Bad options alone: a note says so, the defaults apply.
    run_dir = make_run_dir(tmp_path)
    env["DIAG_RUN_DIR"] = str(run_dir)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    notes = details(open_run(str(run_dir)).table("events"), "note")
    assert any("DIAG_OPTIONS is not JSON" in n["reason"] for n in notes)


def test_sigterm_flushes_then_dies_by_sigterm(tmp_path) -> None:
    run_dir = make_run_dir(tmp_path)
    script = write_script(tmp_path, """
        import time, diag
        for i in range(5):
            with diag.stage(f"s{i}"):
                pass
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, str(script)], env=target_env(run_dir, {"flush_s": 30}),
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGTERM
    assert len(open_run(str(run_dir)).table("ranges")) == 5  # flushed though flush_s is 30 s


def test_forked_children_write_their_own_files(tmp_path) -> None:
    code = """
        import multiprocessing as mp, os, sys, diag

        def work():
            with diag.stage("mp_child"):
                pass

        pid = os.fork()
        if pid == 0:
            with diag.stage("child"):
                pass
            sys.exit(0)
        os.waitpid(pid, 0)
        p = mp.get_context("fork").Process(target=work)   # exits through os._exit
        p.start(); p.join()
        with diag.stage("parent"):
            pass
        print(pid, p.pid)
    """
    run, proc = run_target(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    ranges = run.table("ranges")
    by_name = dict(zip(ranges["name"], ranges["pid"], strict=True))
    child, mp_child = (int(x) for x in proc.stdout.split())
    assert by_name["child"] == child and by_name["mp_child"] == mp_child
    assert by_name["parent"] not in (child, mp_child)


def test_bootstrap_is_inert_without_run_dir(tmp_path) -> None:
    code = "import sys; print('diag.collect.recorder' in sys.modules, len(sys.meta_path))"
    script = write_script(tmp_path, code)
    proc = subprocess.run([sys.executable, str(script)], env=target_env(None), capture_output=True, text=True,
                          timeout=60)
    bare = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DIAG_")})
    assert proc.stdout == bare.stdout and proc.stdout.startswith("False")
    assert (BOOTSTRAP / "sitecustomize.py").exists()


def test_tables_stay_bounded(tmp_path) -> None:
    """After table_rows rows, 1 in 2, then 1 in 4...; weights keep totals right."""
    rec = Recorder(str(tmp_path), {"table_rows": 100})
    kept = [w for w in (rec.weight("steps") for _ in range(300_000)) if w]
    assert len(kept) < 1500  # O(table_rows * log(n)), not 300 000
    assert kept[:100] == [1] * 100 and kept[100:150] == [2] * 50 and max(kept) == 1024
    assert abs(sum(kept) - 300_000) < 1024 * 2
    for i in range(300):
        rec.range("request" if i % 2 else "stage", time.time_ns(), 10, source="diag")
    rec.close()
    rows = read_jsonl(str(tmp_path / "raw" / f"ranges.{os.getpid()}.jsonl"))
    assert 100 < len(rows) < 300 and sum(r["weight"] for r in rows) in range(290, 310)
    assert {r["kind"] for r in rows} == {"request", "stage"}
    assert json.dumps(rows[0])  # plain JSON rows


def test_meta_maps_thread_idents_to_native_ids(tmp_path) -> None:
    code = """
        import threading, time
        def idle():
            time.sleep(0.5)
        t = threading.Thread(target=idle, name="worker-1")
        t.start()
        print(threading.get_ident(), threading.get_native_id(), t.ident, t.native_id)
        t.join()
    """
    run, proc = run_target(tmp_path, code, options={"flush_s": 0.1})
    assert proc.returncode == 0, proc.stderr
    main_ident, main_native, ident, native = (int(x) for x in proc.stdout.split())
    meta = [r for p in os.listdir(os.path.join(run.path, "raw")) if p.startswith("meta.")
            for r in read_jsonl(os.path.join(run.path, "raw", p))]
    mapping = {r["thread_ident"]: (r["native_id"], r["thread_name"]) for r in meta if "thread_ident" in r}
    assert mapping[ident] == (native, "worker-1")  # a thread that never touched a hook, seen by the flusher
    assert mapping[main_ident][0] == main_native


def test_targets_own_diag_and_json_modules_win(tmp_path) -> None:
    """A `diag.py` and a `json.py` next to the script are the ones the script imports."""
    (tmp_path / "diag.py").write_text("NAME = 'target diag'\n")
    (tmp_path / "json.py").write_text("NAME = 'target json'\n")
    code = """
        import diag, json, sys
        print(diag.NAME, '|', json.NAME, '|', [m for m in sys.modules if m.split('.')[0] == 'diag'])
    """
    run, proc = run_target(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "target diag | target json | ['diag']"
    assert "process_start" in set(run.table("events")["kind"])  # diag recorded all the same


def _new_modules(env: dict[str, str]) -> set[str]:
    code = "import sys; print(' '.join(sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def test_bootstrap_preimports_only_what_it_must(tmp_path) -> None:
    """What the bootstrap adds to sys.modules: its private recorder modules, threading (the flusher),
    and built-in modules (no file of the target can shadow those); nothing named `diag`."""
    bare_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DIAG_")}
    added = _new_modules(target_env(make_run_dir(tmp_path))) - _new_modules(bare_env)
    private = {m for m in added if m.split(".")[0] == "_diag_rec"}
    assert "_diag_rec.collect.recorder" in private
    assert added - private - set(sys.builtin_module_names) == {"sitecustomize", "threading", "_weakrefset"}


def test_recorder_code_imports_diag_relatively(tmp_path) -> None:
    """Under a target, every module diag loads (hooks, kernel windows included) runs under the private
    name; an absolute `diag.` import anywhere in them (lazy ones too) would load the target's `diag`."""
    import ast

    (tmp_path / "diag.py").write_text("NAME = 'target diag'\n")
    code = """
        import sys, torch, diag
        torch.nn.Linear(2, 2)(torch.ones(1, 2))
        print(diag.NAME)
        print(' '.join(m.__file__ for n, m in list(sys.modules.items()) if n.startswith('_diag_rec.')))
    """
    run, proc = run_target(tmp_path, code)
    assert proc.returncode == 0, proc.stderr
    name, files = proc.stdout.splitlines()
    assert name == "target diag" and len(run.table("steps")) == 1
    assert any(f.endswith(os.path.join("hooks", "torch.py")) for f in files.split())
    for file in files.split():
        for node in ast.walk(ast.parse(open(file).read())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] != "diag", f"{file}:{node.lineno}"
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "diag" for a in node.names), f"{file}:{node.lineno}"
