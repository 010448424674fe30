"""A saturated event loop is the cause, the queue its symptom (docs/rules.md, principles; issue 11).

tokenize-60a and tokenize-60b are live runs of the tokenize variant (FastAPI + uvicorn, ~12 ms of
Python per request on the event loop, 60 req/s) recorded on the 2-core box: the loop thread works
~65% of the time, the model ~25%, and the lag probe (late ticks only) saw the loop held 40% and
36%. Before the fix, 60a came out `queueing` 0.49 vs `cpu_bound` 0.24 and 60b had no verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from serving_rule_cases import CPU, metrics

from diag.engine import diagnose
from diag.engine.diagnose import evaluate_rule
from diag.engine.diagnosis import Diagnosis
from diag.engine.rules import load_rules
from diag.store.run import open_run

DATA = Path(__file__).parent / "data" / "serving"
RULES = {r.id: r for r in load_rules()}
MARGIN = 0.2  # issue 12: a correct verdict wins by evidence, not by a hair

# every recorded server, its truth (test_serving_analysis.py's TRUTH and the two runs above)
LABELS = {
    "tokenize-60a": "cpu_bound", "tokenize-60b": "cpu_bound", "tokenize": "cpu_bound", "tokenize-ann": "cpu_bound",
    "inline": "cpu_bound", "overloaded": "queueing", "sleep": "io_bound", "sleep-ann": "io_bound", "read": "io_bound",
    "flask-tokenize": "cpu_bound", "workers2": "cpu_bound", "overloaded-b16": "queueing",
}


@pytest.fixture(scope="module")
def diagnosed() -> dict[str, Diagnosis]:
    return {name: diagnose(open_run(str(DATA / name))) for name in LABELS}


@pytest.mark.parametrize("name", ["tokenize-60a", "tokenize-60b"])
def test_loop_saturated_by_python_is_cpu_bound_by_a_margin(diagnosed, name):
    d = diagnosed[name]
    assert d.primary == "cpu_bound", (d.primary, d.scores)
    assert "serve.loop_saturated" in [f.rule for f in d.findings]
    assert d.scores["cpu_bound"] - d.scores["queueing"] >= MARGIN, d.scores
    m = d.metrics
    # the probe undercounts short holds; the loop thread's own work does not
    assert m["steady.loop_held_share"] >= m["steady.loop_thread_demand"] > m["steady.loop_blocked_share"]
    for q in ("p50", "p99"):  # the requests are the server's own (handler time within 5%)
        own = json.loads((DATA / name / "server_times.json").read_text())[f"server_handler_{q}_ms"]
        assert abs(m[f"steady.handler_{q}_ms"] - own) <= 0.05 * own


@pytest.mark.parametrize("name", list(LABELS))
def test_every_recorded_server_wins_by_the_margin(diagnosed, name):
    d = diagnosed[name]
    others = [s for label, s in d.scores.items() if label != LABELS[name]]
    assert d.primary == LABELS[name], (d.primary, d.scores)
    assert d.scores[LABELS[name]] - max(others) >= MARGIN, d.scores



# the queue a held loop explains, and the one it does not: the same queue figures, only the loop differs
QUEUE = dict(CPU, steady__requests=400, steady__queue_wait_ratio=3.4, steady__queue_behind_model_share=0.35,
             steady__batch_p50=2, steady__batch_max=16, steady__batcher_seen=1, steady__model_busy_share=0.25)


def test_queue_explained_by_a_working_loop_backs_no_queueing():
    m = metrics(**QUEUE, steady__loop_blocked_share=0.4, steady__loop_thread_demand=0.66, steady__loop_held_share=0.66)
    assert evaluate_rule(RULES["queue.requests_wait"], m) is None
    loop = evaluate_rule(RULES["serve.loop_saturated"], m)
    assert loop is not None and loop.score >= 0.8


def test_queue_behind_a_busy_model_stays_queueing():
    # the overloaded server: the model runs nearly all the time, the loop thread has little work
    m = metrics(**dict(QUEUE, steady__model_busy_share=0.88), steady__loop_blocked_share=0.44,
                 steady__loop_thread_demand=0.2, steady__loop_held_share=0.44)
    q = evaluate_rule(RULES["queue.requests_wait"], m)
    assert q is not None and q.score >= 0.8
    assert evaluate_rule(RULES["serve.loop_saturated"], m) is None
