"""Per-rank figures and the job's spread, on a recorded 2-rank CPU run (gloo, tp_linear --device cpu)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from diag.analysis.ranks import rank_processes, rank_spread, rank_table
from diag.store.run import open_run

RUN = Path(__file__).parent / "data" / "multi_gpu" / "cpu_comm_2ranks"


def test_recorded_ranks_and_their_figures() -> None:
    run = open_run(str(RUN))
    assert [(r, lr) for _, r, lr in rank_processes(run)] == [(0, 0), (1, 1)]
    t = rank_table(run)
    assert t["rank"].tolist() == [0, 1]
    assert (t["steps"] == 50).all()  # rank 0 tells the others when to stop: same step count
    assert (t["comm_calls"] > 8 * 50).all()  # 8 all_reduce per step, plus the stop broadcasts
    # tp_linear --kind comm: each rank spends most of its stepping span in all_reduce
    assert t["comm_share"].between(0.5, 1.0).all()
    assert (t["comm_bytes"] > 0).all()


def test_spread_names_the_slowest_rank_and_the_imbalance() -> None:
    t = pd.DataFrame({"rank": [0, 1, 2], "steps_per_s": [100.0, 80.0, 100.0], "step_p50_ms": [10.0, 12.5, 10.0],
                      "comm_share": [0.2, 0.05, 0.3]})
    s = rank_spread(t)
    assert s["ranks"] == 3 and s["slowest_rank"] == 1
    assert s["steps_per_s_imbalance"] == pytest.approx(0.25) and s["step_time_imbalance"] == pytest.approx(0.25)
    assert (s["comm_share_max"], s["comm_share_max_rank"]) == (0.3, 2)
    assert rank_spread(t.iloc[:1]) == {}


def test_a_single_process_has_no_ranks(tmp_path) -> None:
    run = open_run(str(Path(__file__).parent / "data" / "multi_gpu" / "cpu_comm_2ranks"))
    one = run.table("meta")
    assert len(one["pid"].unique()) >= 2
    from diag.analysis.members import member_run

    assert rank_processes(member_run(run, rank_processes(run)[0][0])) == []
