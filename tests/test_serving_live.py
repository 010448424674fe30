"""Live: the benchmark servers under diag profile on loopback, driven by diag load (slow; the rest of
issue 11's variants are recorded runs in tests/data/serving, test_serving_analysis.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diag.engine import diagnose
from diag.store.run import open_run

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _serve(tmp_path: Path, *args: str) -> dict:
    import json

    out = subprocess.run([sys.executable, "-m", "benchmarks.serving.run_variant", "--duration", "6",
                          "--out", str(tmp_path / "run"), *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("variant, rate, label, rule", [
    # the loop saturated by Python work is the cause, the queue in front of the model its symptom
    ("tokenize", "60", "cpu_bound", "serve.loop_saturated"),
    ("sleep", "35", "io_bound", "serve.blocking_call_in_async"),
])
def test_fastapi_variant_live(tmp_path, variant, rate, label, rule):
    res = _serve(tmp_path, "--variant", variant, "--rate", rate)
    d = diagnose(open_run(res["run"]))
    assert d.primary == label, (d.primary, d.scores)
    assert d.margin is not None and d.margin >= 0.2, d.scores  # issue 12: won by evidence, not by a hair
    assert rule in [f.rule for f in d.findings]
    for q in ("p50", "p99"):  # against the server's own timing of the requests that started in the steady window
        ours, theirs = d.metrics[f"steady.handler_{q}_ms"], res[f"server_steady_handler_{q}_ms"]
        assert abs(ours - theirs) <= 0.05 * theirs, (q, ours, theirs)


def test_uvicorn_two_workers_live(tmp_path):
    res = _serve(tmp_path, "--variant", "base", "--rate", "30", "--workers", "2")
    d = diagnose(open_run(res["run"]))
    rules = [f.rule for f in d.findings]
    # a peer worker is never an input worker (the label itself follows the shared host's load)
    assert not {"io.workers_blocked", "io.workers_reading", "cpu.input_workers_busy"} & set(rules)
    members = d.serving.get("members") or []
    assert len(members) == 2 and sum(m["requests"] for m in members) == pytest.approx(d.metrics["steady.requests_found"], abs=3)


@pytest.mark.parametrize("args, label, rule", [
    # one sync worker offered far more than it serves: the wait is in the listening socket's accept queue
    (("--variant", "base", "--model", "large", "--rate", "200"), "queueing", "serve.wait_before_handler"),
    # a blocking call holds the worker: off the CPU in the handler
    (("--variant", "sleep", "--rate", "20"), "io_bound", "serve.handler_blocked"),
])
def test_flask_variant_live(tmp_path, args, label, rule):
    res = _serve(tmp_path, "--server", "flask", *args)
    d = diagnose(open_run(res["run"]))
    assert d.primary == label, (d.primary, d.scores)
    assert d.margin is not None and d.margin >= 0.2, d.scores
    assert rule in [f.rule for f in d.findings]
    ours, theirs = d.metrics["steady.handler_p50_ms"], res["server_steady_handler_p50_ms"]
    assert abs(ours - theirs) <= 0.05 * theirs, (ours, theirs)
