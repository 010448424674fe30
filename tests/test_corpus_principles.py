"""Issue 12's remaining corpus misses, as synthetic runs built from the recorded ones.

Each test fails on the reasoning diag had before the fix it names (docs/rules.md, principles).
"""

from __future__ import annotations

import numpy as np
from analysis_fixtures import RunBuilder, _loop, ns

from diag.analysis.phases import one_off_shapes
from diag.engine import diagnose

# multi_model_boot on the 2-core box (--seconds 6): pre-warm batch sizes 1..16, then 4 batches of 4
PREWARM = [(1, 0.18), (2, 0.33), (4, 0.55), (8, 1.05), (16, 1.72)]
SCORING = [(4, d) for d in (0.42, 0.73, 0.52, 0.69)]


def _short_batch_job(path: str) -> RunBuilder:
    """Import 3.2 s, 2.8 s writing and loading three checkpoints, pre-warm 5 shapes, score 4 batches, exit."""
    b = RunBuilder(path, duration_s=13.5, gpu=False)
    b.event("import", 0.1, 3.2, "torch")
    t = 6.03
    for bs, d in PREWARM + SCORING:
        b.add("steps", ts_ns=ns(t), dur_ns=int(d * 1e9), pid=1000, tid=1000, source="torch", model="Pipeline",
              batch=bs, shapes=f"[[{bs},64],[{bs},3,96,96]]", dtype="int64", device="cpu", gpu_ns=-1, syncs=0,
              seq=0, in_window=False)
        t += d + 0.002
    b.thread_cpu(0.97)
    b.host(100)
    return b


def test_prewarm_calls_are_one_time_cost_however_few_steps_follow():
    # more pre-warm calls than scoring steps: the old rule looked for them only in the first half
    shapes = np.array([f"[[{bs},64]]" for bs, _ in PREWARM + SCORING], dtype=object)
    assert one_off_shapes(shapes).tolist() == [True, True, False, True, True] + [False] * 4


def test_a_short_batch_job_that_prewarms_more_than_it_scores_is_cold_start(tmp_path):
    d = diagnose(_short_batch_job(str(tmp_path)).write())
    # old code: the batch-16 pre-warm call opened the steady state, coldstart.share 0.30, compute_bound 0.70
    assert d.metrics["coldstart.share"] >= 0.4, d.metrics["coldstart.share"]
    assert d.primary == "cold_start" and d.margin >= 0.2, (d.scores, d.margin)


LOADER_WAIT = ("<module> (load.py:85);main (load.py:74);_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725);"
               "_MultiProcessingDataLoaderIter._try_get_data (torch/utils/data/dataloader.py:1291);"
               "Queue.get (multiprocessing/queues.py:113);_ConnectionBase.poll (multiprocessing/connection.py:257);"
               "Connection._poll (multiprocessing/connection.py:440);wait (multiprocessing/connection.py:947);"
               "_PollLikeSelector.select (selectors.py:415)")


def _record_loader(path: str, worker_pct: float = 45, worker_queued: float = 0.0) -> RunBuilder:
    """record_loader on the shared 2-core box: 2 DataLoader workers inflate and parse records (0.9 core), the
    main thread runs a small ResNet 55% of each cycle and waits in the queue's poll the rest, a wait the
    sampler never flagged idle (woken by a batch, the thread sits runnable in the same frame)."""
    b = RunBuilder(path, duration_s=18.0, gpu=False)
    period = 0.070
    steps = _loop(b, period, 0.55)
    b.stacks([(end, period * 0.45, LOADER_WAIT, False) for _, end in steps])
    for k in (1, 2):
        b.host(worker_pct, pid=1000 + k, ppid=1000)
        b.thread_cpu(worker_pct / 100, pid=1000 + k, tid=1000 + k, run_delay=worker_queued)
    b.thread_cpu(0.22, run_delay=0.4)
    b.host(25)
    # other processes hold 1.6 cores beside the tree's (fixture host: 16 cores)
    for t in np.arange(0, b.duration_s + 1e-9, 0.1):
        b.add("system", ts_ns=ns(t), cpu_pct=100 * (0.25 + 2 * worker_pct / 100 + 1.6) / 16, iowait_pct=0.0)
    return b


def test_a_wait_for_ones_own_workers_is_waiting_whatever_the_idle_flag(tmp_path):
    d = diagnose(_record_loader(str(tmp_path)).write())
    # old code: the poll samples counted as work outside the model (capped at the thread's CPU)
    assert d.metrics["steady.outside_busy_share"] <= 0.05, d.metrics["steady.outside_busy_share"]
    assert d.primary == "cpu_bound" and d.margin >= 0.2, (d.scores, d.margin)


def test_worker_wait_frames_are_the_blocking_leaves_only():
    import pandas as pd

    from diag.analysis.stacks import worker_wait_frames

    unpickle = ("main (load.py:74);_MultiProcessingDataLoaderIter._try_get_data (torch/utils/data/dataloader.py:1291);"
                "Queue.get (multiprocessing/queues.py:122);rebuild_storage_fd (torch/multiprocessing/reductions.py:511)")
    got = worker_wait_frames(pd.Series([LOADER_WAIT, unpickle, "main (app.py:3);select (selectors.py:415)"]))
    # a receive's unpickling is work; a select on a socket of one's own is not a worker wait
    assert got.tolist() == [True, False, False]


def test_input_workers_queued_for_a_core_still_want_it(tmp_path):
    # a busy host: the two workers get 0.1 core each and wait for one 90% of the time (record_loader, pass 3)
    d = diagnose(_record_loader(str(tmp_path), worker_pct=10, worker_queued=0.9).write())
    assert d.metrics["steady.worker_cpu_cores"] < 0.5 <= d.metrics["steady.worker_cpu_demand"]
    # old rule: judged on the 0.2 core they got, cpu.input_workers_busy did not fire
    assert d.primary == "cpu_bound" and d.margin >= 0.2, (d.scores, d.margin)
