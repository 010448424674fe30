"""Matching requests with the step that served them (queue wait = arrival to that step's start)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis.latency import queue_wait_ns

MS = 1_000_000


def _req(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame([dict(ts_ns=a * MS, dur_ns=(b - a) * MS, pid=1, tid=t) for a, b, t in rows])


def _steps(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame([dict(ts_ns=a * MS, dur_ns=(b - a) * MS, pid=1, tid=t, weight=1) for a, b, t in rows])


def test_burst_into_a_pool_matches_the_closing_threads_step():
    # 4 requests arrive at t=0 on the main thread; pool threads 11 and 12 each serve two,
    # 1 ms per step, and close the request (end_range) right after its step
    steps = _steps([(0, 1, 11), (0, 1, 12), (1, 2, 11), (1, 2, 12)])
    req = _req([(0, 1, 11), (0, 1, 12), (0, 2, 11), (0, 2, 12)])
    wait = queue_wait_ns(req, steps) / MS
    assert wait.tolist() == [0, 0, 1, 1]  # service = 1 ms each, never clipped to 0


def test_handed_off_request_never_matches_a_step_that_starts_after_it_closed():
    # the request closes on the main thread (no steps there); the only step near its end starts after it
    steps = _steps([(0, 3, 7), (10, 11, 7)])
    req = _req([(5, 10, 1)])
    assert np.isnan(queue_wait_ns(req, steps)).all()
