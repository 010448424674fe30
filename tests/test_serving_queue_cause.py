"""Over capacity, the queue is the verdict and the busy model its reason (docs/rules.md, principles; issue 11).

overloaded-b16 is a live run of the overloaded variant (FastAPI + uvicorn, the large model through an
asyncio micro-batcher of up to 16, 200 req/s offered) on the 2-core box: batches are full (16), the
model thread runs 87% of the time, requests wait 2.2 s (p50) for a 92 ms service. Before the fix it came
out `compute_bound` 0.98 vs `queueing` 0.82: the CPU model-time rule stepped back for the queue only
at batches of 8 or less.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from serving_rule_cases import CPU, metrics

from diag.engine import diagnose
from diag.engine.diagnose import evaluate_rule
from diag.engine.rules import load_rules
from diag.store.run import open_run

DATA = Path(__file__).parent / "data" / "serving"
RULES = {r.id: r for r in load_rules()}
MARGIN = 0.2  # issue 12: a correct verdict wins by evidence, not by a hair


def test_full_batches_behind_a_busy_model_are_queueing_by_a_margin():
    d = diagnose(open_run(str(DATA / "overloaded-b16")))
    assert d.primary == "queueing", (d.primary, d.scores)
    assert d.scores["queueing"] - max(s for k, s in d.scores.items() if k != "queueing") >= MARGIN, d.scores
    rules = [f.rule for f in d.findings]
    assert "queue.requests_wait" in rules and "serve.model_thread_saturated" in rules
    # the model's compute is the reason, still found (a secondary finding)
    assert "compute.cpu_model_time" in rules
    m = d.metrics
    assert m["steady.batch_p50"] == 16 and m["steady.model_busy_share"] >= 0.8
    # every request the server timed was seen (the queue grows through the run: its percentiles over the
    # steady state are not the whole run's, so the handler times are not compared here)
    own = json.loads((DATA / "overloaded-b16" / "server_times.json").read_text())["server_handler_n"]
    assert abs(m["steady.requests_found"] - own) <= 0.02 * own, (m["steady.requests_found"], own)



# a CPU server whose model thread runs all the time; only the queue and the batch size vary
MODEL = dict(CPU, steady__inside_model_share=0.86, steady__requests=2500, steady__batcher_seen=1,
             steady__model_busy_share=0.87, steady__queue_behind_model_share=0.9)


@pytest.mark.parametrize("batch", [1, 4, 16, 32, 64])
def test_batch_size_picks_the_fix_not_the_label(batch):
    m = metrics(**MODEL, steady__batch_p50=batch, steady__batch_max=batch, steady__queue_wait_ratio=18)
    q = evaluate_rule(RULES["queue.requests_wait"], m)
    c = evaluate_rule(RULES["compute.cpu_model_time"], m)
    assert q is not None and c is not None
    assert q.score - c.score >= MARGIN, (batch, q.score, c.score)


def test_requests_served_as_they_come_are_compute_bound():
    # no queue worth the name: the model's time per request is the latency
    m = metrics(**MODEL, steady__batch_p50=16, steady__batch_max=16, steady__queue_wait_ratio=0.2)
    assert evaluate_rule(RULES["queue.requests_wait"], m) is None
    c = evaluate_rule(RULES["compute.cpu_model_time"], m)
    assert c is not None and c.score >= 0.9


def test_a_queue_not_behind_the_model_leaves_its_compute_alone():
    # requests wait, but not for the model (a held loop, a slow client): the model's time stays compute
    m = metrics(**dict(MODEL, steady__queue_behind_model_share=0.05), steady__batch_p50=16, steady__batch_max=16,
                 steady__queue_wait_ratio=5)
    c = evaluate_rule(RULES["compute.cpu_model_time"], m)
    assert c is not None and c.score >= 0.9
