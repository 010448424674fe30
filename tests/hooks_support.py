"""Running a real Python target under diag's bootstrap, as the launcher does (for the hooks tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from diag.store.run import Run, open_run

REPO = Path(__file__).resolve().parents[1]
BOOTSTRAP = REPO / "diag" / "collect" / "bootstrap"


def make_run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"schema": "diag.run/1", "start_ns": time.time_ns()}))
    return run_dir


def target_env(run_dir: Path | None, options: dict[str, Any] | None = None,
               extra_path: list[str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIAG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), *(extra_path or [])])
    if run_dir is not None:
        env["DIAG_RUN_DIR"] = str(run_dir)
        env["DIAG_OPTIONS"] = json.dumps(options or {})
    return env


def write_script(tmp_path: Path, code: str, name: str = "target.py") -> Path:
    script = tmp_path / name
    script.write_text(textwrap.dedent(code))
    return script


def run_target(tmp_path: Path, code: str, options: dict[str, Any] | None = None,
               extra_path: list[str] | None = None, python: str = sys.executable,
               timeout: float = 120) -> tuple[Run, subprocess.CompletedProcess[str]]:
    """Run `code` as a script under the bootstrap; return the run and the process."""
    run_dir = make_run_dir(tmp_path)
    script = write_script(tmp_path, code)
    proc = subprocess.run([python, str(script)], env=target_env(run_dir, options, extra_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)
    return open_run(str(run_dir)), proc


def details(events: Any, kind: str) -> list[dict[str, Any]]:
    """The parsed `detail` of every event of one kind."""
    return [json.loads(d) for d in events[events["kind"] == kind]["detail"]]
