"""A program that mostly sleeps between small calls has no bottleneck."""

from __future__ import annotations

import analysis_fixtures as F
from analysis_fixtures import STARTUP_S, RunBuilder

from diag.engine import diagnose

SLEEP = "<module> (app.py:1);main (app.py:30);Event.wait (/usr/lib/python3.12/threading.py:655)"


def _poller(path: str, stack: str) -> RunBuilder:
    """5 ms of model every 0.4 s; the thread waits in `stack` between calls."""
    b = RunBuilder(path, gpu=False)
    steps = F._loop(b, 0.4, 0.0125)
    b.stacks([(end, 0.39, stack, True) for _, end in steps])
    b.thread_cpu(0.02)
    b.host(3)
    return b


def test_self_paced_program_gets_no_label(tmp_path):
    d = diagnose(_poller(str(tmp_path), SLEEP).write())
    assert d.metrics["steady.known_wait_share"] > 0.9
    assert d.primary is None, d.scores
    assert d.findings[0].rule == "verdict.idle" and "idle" in d.findings[0].title
    assert all(f.rule != "fallback.outside_wait" for f in d.findings)


def test_unnamed_wait_is_still_reported_on_an_idle_thread(tmp_path):
    # no stack samples: the wait is unnamed, the fallback says so, but the idle thread gets no label
    b = RunBuilder(str(tmp_path), gpu=False)
    F._loop(b, 0.4, 0.0125)
    b.thread_cpu(0.02)
    b.host(3)
    d = diagnose(b.write())
    assert any(f.rule == "fallback.outside_wait" for f in d.findings)
    assert d.primary is None and any(f.rule == "verdict.idle" for f in d.findings)


def test_busy_program_is_not_idle(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    F._loop(b, 0.02, 0.9, start=STARTUP_S)
    b.thread_cpu(0.9)
    b.host(100)
    d = diagnose(b.write())
    assert d.primary == "compute_bound"


MODEL = "<module> (app.py:1);main (app.py:30);Module._call_impl (/x/torch/nn/modules/module.py:1750);forward (net.py:5)"


def test_coarse_stack_samples_do_not_hide_the_sleep(tmp_path):
    # py-spy at 20 Hz (its budget on a small host) merges a run of one stack into one sample: the sample
    # that caught the 5 ms call stretches 100 ms into the sleep after it. The stacks say how the time
    # outside the model splits (all of it a known wait); how much there was comes from the steps.
    b = RunBuilder(str(tmp_path), gpu=False)
    steps = F._loop(b, 0.4, 0.0125)
    b.stacks([(start, 0.1, MODEL, False) for start, _ in steps]
             + [(start + 0.1, 0.3, SLEEP, True) for start, _ in steps])
    b.thread_cpu(0.02)
    b.host(3)
    d = diagnose(b.write())
    assert d.metrics["steady.known_wait_share"] > 0.9
    assert d.metrics["steady.blocked_outside_share"] < 0.05
    assert d.primary is None, d.scores
