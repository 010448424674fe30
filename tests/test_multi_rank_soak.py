"""Soak on CPU: the 2-rank stand-in (gloo) under `diag profile -- torchrun --nproc-per-node 2 ...`, 3 runs in a
row with every collector on; each must finish within the bound. The GPU check runs the same script 20 times
(docs/multi-gpu.md)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOAK = ROOT / "benchmarks" / "multi_gpu" / "soak.sh"
RUNS = 3  # the second and third runs find what a run leaves behind; the GPU check runs 20
# Per run, on a loaded 2-core box: three torch imports (torchrun + 2 ranks) dominate (~15-50 s seen).
BOUND_S = 150


@pytest.mark.slow
def test_runs_in_a_row_all_finish(tmp_path) -> None:
    pytest.importorskip("torch.distributed")
    bin_dir = ROOT / ".venv" / "bin"
    if not (bin_dir / "torchrun").exists():
        pytest.skip("no torchrun in .venv")
    env = {**os.environ, "OUT": str(tmp_path), "PY": str(bin_dir / "python")}
    r = subprocess.run([str(SOAK), str(RUNS), str(BOUND_S), "--", "--device", "cpu", "--seconds", "1"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUNS * (BOUND_S + 20))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("run ")]
    assert len(lines) == RUNS, r.stdout + r.stderr
    assert all(": pass " in ln for ln in lines), r.stdout
    assert r.returncode == 0 and f"soak: {RUNS}/{RUNS} passed" in r.stdout
    durations = [float(m) for m in re.findall(r"pass ([0-9.]+)s", r.stdout)]
    assert max(durations) < BOUND_S
    for i in range(1, RUNS + 1):  # every rank recorded, every run sealed
        metas = list((tmp_path / f"run{i}" / "raw").glob("meta.*.jsonl"))
        ranks = {m.group(1) for p in metas for m in re.finditer(r'"rank":(\d+)', p.read_text())}
        assert ranks == {"0", "1"}
