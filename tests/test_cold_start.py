"""Cold start on short CPU jobs: measured import baseline, pre-warm calls, run-queue delay."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_fixtures import RunBuilder, ns

from diag.analysis.metrics import compute_metrics
from diag.analysis.phases import one_off_shapes
from diag.engine import diagnose


def test_one_off_shapes_are_the_leading_prewarm_calls():
    batches = [1, 2, 4, 8, 16, 4, 4, 4, 4, 4, 4]
    got = one_off_shapes(np.array([f"[[{b},64]]" for b in batches], dtype=object))
    assert got.tolist() == [True, True, False, True, True] + [False] * 6
    # a growing decode context has a new shape every step: nothing is a pre-warm call
    assert not one_off_shapes(np.array([f"[[1,{n}]]" for n in range(40)], dtype=object)).any()
    # a one-off shape late in the run is not warm-up
    late = ["[[4]]"] * 20 + ["[[9]]"] + ["[[4]]"] * 20
    assert not one_off_shapes(np.array(late, dtype=object)).any()


def _boot(path: str, *, run_delay: bool = False) -> RunBuilder:
    """Import 1 s, 1.2 s of building and loading models, pre-warm 5 shapes, score 6 batches of 4, exit."""
    b = RunBuilder(path, duration_s=4.2, gpu=False)
    b.event("import", 0.1, 1.0, "torch")
    t = 2.3
    durs = {1: 0.06, 2: 0.07, 4: 0.11, 8: 0.19, 16: 0.40}
    for i, batch in enumerate([1, 2, 4, 8, 16] + [4] * 6):
        d = durs[batch] if i < 5 else 0.11
        b.add("steps", ts_ns=ns(t), dur_ns=int(d * 1e9), pid=1000, tid=1000, source="torch", model="Net",
              batch=batch, shapes=f"[[{batch},3,96,96]]", dtype="float32", device="cpu", gpu_ns=-1, syncs=0,
              seq=i, in_window=False)
        t += d + 0.001
    b.thread_cpu(0.95, every_s=0.05, run_delay=0.0)
    b.host(100)
    return b


def test_short_cpu_job_with_prewarm_is_cold_start(tmp_path):
    run = _boot(str(tmp_path)).write()
    m = compute_metrics(run)
    assert m["startup.baseline_s"] == pytest.approx(1.3)
    assert m["startup.excess_s"] == pytest.approx(2.36 - 1.3, abs=0.01)
    # batch 2, 8 and 16 are pre-warm calls (batch 1 is the first step, already startup)
    assert m["warmup.excess_s"] == pytest.approx(0.07 + 0.19 + 0.40, abs=0.01)
    d = diagnose(run)
    assert d.primary == "cold_start", d.scores


def test_warmup_slowed_by_the_run_queue_is_not_warmup(tmp_path):
    b = RunBuilder(str(tmp_path), duration_s=30.0, gpu=False)
    b.event("import", 0.1, 1.0, "torch")
    # 40 steps at 200 ms (another process held the cores), then 10 ms steps
    slow = b.steps(2.0, 0.2, 0.2, 40, shapes="[[1,60]]")
    b.steps(slow[-1][1] + 0.01, 0.011, 0.01, 2000, shapes="[[1,60]]")
    # the stepping thread waited for a core 95% of the time during the slow steps
    for t in np.arange(0, 30.0, 0.1):
        delay = 0.95 * (min(t, slow[-1][1]) - 2.0) if t > 2.0 else 0.0
        b.add("threads", ts_ns=ns(t), pid=1000, tid=1000, user_s=0.5 * t, system_s=0.0, run_delay_s=delay)
    m = compute_metrics(b.write())
    assert m["warmup.excess_s"] < 1.0  # 7.6 s without the run-queue delay


def test_diags_own_profiler_init_is_not_the_programs_cold_start() -> None:
    """The H200 run of a steady compute job: 4.7 s of CUPTI init sits in its startup."""
    import os

    from diag.store.run import open_run

    run = open_run(os.path.join(os.path.dirname(__file__), "data", "gpu_heldout", "pinned_stream"))
    m = compute_metrics(run)
    assert m["startup.diag_s"] > 3.0
    assert m["startup.excess_s"] < m["startup.duration_s"] - m["startup.baseline_s"] - 3.0
