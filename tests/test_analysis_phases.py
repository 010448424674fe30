"""Phases and interval arithmetic."""

from __future__ import annotations

import numpy as np
from analysis_fixtures import STARTUP_S, RunBuilder, ns

from diag.analysis import intervals
from diag.analysis.phases import compute_phases, settle_index


def test_merge_and_clipped_total():
    s, e = intervals.merge(np.array([0, 10, 20, 50]), np.array([5, 30, 25, 60]))
    assert s.tolist() == [0, 10, 50] and e.tolist() == [5, 30, 60]
    assert intervals.clipped_total(np.array([0, 10]), np.array([5, 30]), 3, 20) == 2 + 10


def test_inside_overlaps_covered():
    st, en = np.array([0, 10, 50]), np.array([5, 30, 60])
    assert intervals.inside(np.array([7, 12, 40, 55, 70]), st, en).tolist() == [False, True, False, True, False]
    assert intervals.overlaps(np.array([6, 28, 31]), np.array([9, 35, 49]), st, en).tolist() == [False, True, False]
    got = intervals.covered(st, en, np.array([0, 3, 12, 40, 0]), np.array([100, 12, 20, 55, 4]))
    assert got.tolist() == [35, 4, 8, 5, 4]


def test_settle_index_finds_the_end_of_warmup():
    rng = np.random.default_rng(0)
    dur = np.concatenate([[500.0], np.linspace(60, 25, 30), rng.normal(10, 1, 400)])
    k = settle_index(dur)
    assert 20 <= k <= 35


def test_settle_index_no_warmup_and_short_runs():
    assert settle_index(np.full(100, 10.0)) == 1
    assert settle_index(np.array([5.0, 1.0, 1.0])) == 1
    assert settle_index(np.array([5.0])) == 0


def test_settle_index_never_eats_more_than_half():
    assert settle_index(np.linspace(100, 1, 200)) <= 100


def test_phases_from_steps(tmp_path):
    b = RunBuilder(str(tmp_path), duration_s=20, gpu=False)
    durs = [2.0] + [0.05] * 20 + [0.01] * 500
    t, starts = STARTUP_S, []
    for d in durs:
        starts.append(t)
        t += d + 0.005
    for i, (s, d) in enumerate(zip(starts, durs, strict=True)):
        b.add("steps", ts_ns=ns(s), dur_ns=int(d * 1e9), pid=1, tid=1, source="torch", model="M", batch=1,
              shapes="[[1]]", dtype="float32", device="cpu", gpu_ns=-1, syncs=0, seq=i, in_window=False)
    ph = compute_phases(b.write())
    assert ph.basis == "steps" and (ph.main_pid, ph.main_tid) == (1, 1)
    assert ph.startup.end_ns == ns(STARTUP_S + 2.0)
    assert ph.warmup is not None and ph.warmup.start_ns == ph.startup.end_ns
    assert 15 <= ph.warmup_steps <= 25
    assert ph.steady.start_ns == ph.warmup.end_ns
    assert ph.steady.end_ns == ns(starts[-1] + durs[-1])


def _stepping(b: RunBuilder, parts: list[tuple[int, float, float]]) -> None:
    """Steps on one thread: (count, step seconds, seconds between steps) per part."""
    t, i = STARTUP_S, 0
    for count, d, gap in parts:
        for _ in range(count):
            b.add("steps", ts_ns=ns(t), dur_ns=int(d * 1e9), pid=1, tid=1, source="torch", model="M", batch=1,
                  shapes="[[1]]", dtype="float32", device="cpu", gpu_ns=-1, syncs=0, seq=i, in_window=False)
            t, i = t + d + gap, i + 1


def test_a_slower_host_is_no_warmup(tmp_path):
    # The H200 host ran a decode loop 1.6x slower for its first 18 s: the steps and the program's own
    # work between them alike (tests/data/gpu_drift). Nothing warmed up: no warm-up phase.
    b = RunBuilder(str(tmp_path), duration_s=40, gpu=False)
    _stepping(b, [(1, 0.5, 0.002), (2000, 0.006, 0.0016), (2200, 0.0037, 0.001)])
    ph = compute_phases(b.write())
    assert ph.warmup is None, ph.warmup_steps


def test_a_slow_model_with_a_steady_host_is_warmup(tmp_path):
    # the same slow stretch in the steps alone (the program's work between them unchanged): the model warmed up
    b = RunBuilder(str(tmp_path), duration_s=40, gpu=False)
    _stepping(b, [(1, 0.5, 0.001), (2000, 0.006, 0.001), (2200, 0.0037, 0.001)])
    ph = compute_phases(b.write())
    assert ph.warmup is not None and 1900 <= ph.warmup_steps <= 2100


def test_phases_from_requests_and_whole_run(tmp_path):
    b = RunBuilder(str(tmp_path / "r"), duration_s=10, gpu=False)
    for i in range(50):
        b.request(3 + i * 0.1, 0.05)
    ph = compute_phases(b.write())
    assert ph.basis == "requests"
    assert ph.startup.end_ns == ns(3.05)

    empty = RunBuilder(str(tmp_path / "e"), duration_s=10, gpu=False)
    empty.host(100)
    ph = compute_phases(empty.write())
    assert ph.basis == "run" and ph.startup is None and ph.warmup is None
    assert ph.steady.duration_s == 10


def test_main_thread_is_the_one_with_most_step_time(tmp_path):
    b = RunBuilder(str(tmp_path), duration_s=10, gpu=False)
    b.steps(4.0, 0.1, 0.01, 50, tid=7)
    b.steps(4.0, 0.1, 0.08, 50, tid=8)
    ph = compute_phases(b.write())
    assert ph.main_tid == 8
