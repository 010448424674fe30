"""Does diag give each sample workload the right verdict?

- On the CPU: profile every CPU-valid sample workload for real, as a user
  would (`diag profile -- python sample_workloads/X.py --device cpu`).
- On the H200: read the runs recorded there (tests/data/gpu/<workload>/,
  made by benchmarks/gpu_session.sh) and diagnose them here.
- Held out: runs of benchmarks/heldout/ programs recorded on the H200
  (tests/data/gpu_heldout/, made by benchmarks/heldout/run_gpu.sh), written
  by someone else after the rules were tuned, with their own expectations
  (benchmarks/heldout/expected.py). Two were fixed after they first missed
  (docs/accuracy.md says which); the rest are as first seen.

The expected labels live in tests/accuracy_expected.py, which diag never reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from accuracy_expected import EXPECTED

from diag.engine import diagnose
from diag.store.run import open_run

ROOT = Path(__file__).resolve().parent.parent
GPU_RUNS = ROOT / "tests" / "data" / "gpu"
CPU_SECONDS = 12

CPU_CASES = sorted(w for w, devices in EXPECTED.items() if "cpu" in devices)
GPU_CASES = sorted(p.name for p in GPU_RUNS.iterdir() if (p / "run.json").exists()) if GPU_RUNS.exists() else []
HELDOUT_RUNS = ROOT / "tests" / "data" / "gpu_heldout"
HELDOUT_CASES = sorted(p.name for p in HELDOUT_RUNS.iterdir() if (p / "run.json").exists())


@pytest.mark.slow
@pytest.mark.parametrize("workload", CPU_CASES)
def test_cpu_workload_verdict(workload: str, tmp_path: Path) -> None:
    expected, why = EXPECTED[workload]["cpu"]
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "diag", "profile", "--out", str(out), "--json", str(tmp_path / "d.json"), "--",
         sys.executable, str(ROOT / "sample_workloads" / f"{workload}.py"), "--device", "cpu",
         "--seconds", str(CPU_SECONDS)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # --json FILE: diag's machine output never mixes with the target's stdout.
    diagnosis = json.loads((tmp_path / "d.json").read_text())
    scores = {k: round(v, 2) for k, v in diagnosis["scores"].items() if v > 0}
    assert diagnosis["primary"] == expected, f"{workload}: expected {expected} ({why}); scores {scores}"


@pytest.mark.parametrize("workload", GPU_CASES)
def test_recorded_h200_run_verdict(workload: str) -> None:
    expected, why = EXPECTED[workload]["cuda"]
    run = open_run(str(GPU_RUNS / workload))
    assert run.manifest["gpu"]["devices"][0]["name"] == "NVIDIA H200"
    d = diagnose(run)
    scores = {k: round(v, 2) for k, v in d.scores.items() if v > 0}
    assert d.primary == expected, f"{workload}: expected {expected} ({why}); scores {scores}"


def test_every_gpu_fixture_has_an_expectation() -> None:
    for workload in GPU_CASES:
        assert "cuda" in EXPECTED.get(workload, {}), workload
    assert os.path.isdir(GPU_RUNS) or not GPU_CASES


def _heldout_expectations():  # noqa: ANN202 - (EXPECTED, verdict_ok) of benchmarks/heldout/expected.py
    import importlib.util

    spec = importlib.util.spec_from_file_location("heldout_expected", ROOT / "benchmarks" / "heldout" / "expected.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EXPECTED, module.verdict_ok


@pytest.mark.parametrize("workload", HELDOUT_CASES)
def test_heldout_h200_run_verdict(workload: str) -> None:
    expected, verdict_ok = _heldout_expectations()
    label, why = expected[workload]["cuda"]
    d = diagnose(open_run(str(HELDOUT_RUNS / workload)))
    scores = {k: round(v, 2) for k, v in d.scores.items() if v > 0}
    assert verdict_ok(workload, "cuda", d.primary, d.scores), (
        f"{workload}: expected {label} ({why}); got {d.primary}, scores {scores}")
