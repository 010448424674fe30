"""Corpus programs (benchmarks/corpus) recorded on the H200: each gets its expected label by a margin >= 0.2.

text_encoder_boot is the issue-12 start-up case on the GPU: 4.2 s of tracing, freezing, caching and
warming buckets before a 2 s burst, after a 5.7 s import/CUDA baseline. Before one-time cost was weighed
against the time past that baseline, its launch-bound burst won (0.67 vs cold_start 0.53).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from diag.engine.diagnose import diagnose
from diag.store.run import open_run

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "tests" / "data" / "gpu_corpus"
_spec = importlib.util.spec_from_file_location("corpus_expected", ROOT / "benchmarks" / "corpus" / "expected.py")
expected = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(expected)  # type: ignore[union-attr]


@pytest.mark.parametrize("program", sorted(p.name for p in RUNS.iterdir()))
def test_recorded_h200_corpus_verdict(program: str) -> None:
    label, why = expected.EXPECTED[program]["cuda"]
    d = diagnose(open_run(str(RUNS / program)))
    scores = {k: round(v, 2) for k, v in d.scores.items() if v > 0}
    assert d.primary == label, f"{program}: expected {label} ({why}); scores {scores}"
    assert d.margin >= expected.MIN_MARGIN, (program, d.runner_up, d.margin, scores)


def test_a_slower_host_is_no_cold_start() -> None:
    """hf_greedy_decode on the H200, recorded while the host ran it 1.6x slower for its first 18 s (steps
    and generate()'s own work between them alike), then at its usual pace: that stretch is no warm-up. When it
    counted as one, cold_start won 0.67 against launch_bound 0.61."""
    d = diagnose(open_run(str(ROOT / "tests" / "data" / "gpu_drift" / "hf_greedy_decode")))
    assert d.primary == "launch_bound", d.scores
    assert d.margin >= expected.MIN_MARGIN, (d.runner_up, d.margin)

