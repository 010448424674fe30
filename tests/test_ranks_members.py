"""Ranks judged as members (issues 17 and 13): a recorded 2-rank CPU run and a directory of rank traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from diag.analysis.members import judge_members
from diag.analysis.ranks import rank_processes
from diag.engine import diagnose
from diag.engine.diagnosis import Diagnosis
from diag.errors import DiagError
from diag.store.importers import open_any
from diag.store.rank_traces import RankTraces
from diag.store.run import open_run
from diag.views.console import render_text
from diag.views.ranks import rank_rows

DATA = Path(__file__).parent / "data"
RUN = DATA / "multi_gpu" / "cpu_comm_2ranks"
TRACES = DATA / "traces" / "hta_ranks_sendrecv"


@pytest.fixture(scope="module")
def recorded() -> Diagnosis:
    return diagnose(open_run(str(RUN)))


@pytest.fixture(scope="module")
def traced() -> Diagnosis:
    return diagnose(open_any(str(TRACES)))


def test_judge_members_takes_the_members_to_judge() -> None:
    run = open_run(str(RUN))
    found = [(pid, "rank", rank) for pid, rank, _ in rank_processes(run)]
    seen: list[int] = []

    def judge(r):  # noqa: ANN001, ANN202 - a stand-in judge: records which view it got
        seen.append(int(r.table("steps")["pid"].unique()[0]))
        return SimpleNamespace(metrics={"steady.steps": 1.0}, primary="compute_bound",
                               scores={"compute_bound": 0.5}, margin=0.25)

    members = judge_members(run, judge, found=found, keep=("steady.steps",))
    assert seen == [pid for pid, _, _ in found]  # each member judged on a view of its own rows only
    assert [(m.role, m.index, m.margin, m.metrics) for m in members] == \
        [("rank", 0, 0.25, {"steady.steps": 1.0}), ("rank", 1, 0.25, {"steady.steps": 1.0})]
    assert judge_members(run, judge, found=found[:1]) == []  # one member is the whole


def test_recorded_two_ranks_are_two_members_with_their_figures(recorded: Diagnosis) -> None:
    assert [(m["rank"], m["local_rank"], m["role"]) for m in recorded.members] == [(0, 0, "rank"), (1, 1, "rank")]
    for m in recorded.members:
        assert m["steps"] == 50 and m["steps_per_s"] > 0 and m["step_p50_ms"] > 0
        assert 0.5 <= m["comm_share"] <= 1.0  # tp_linear --kind comm: mostly in all_reduce
        assert m["metrics"]["steady.steps"] > 0  # judged on its own rows
    r = recorded.ranks
    assert r["ranks"] == 2 and r["slowest_rank"] in (0, 1) and r["comm_share_max_rank"] in (0, 1)
    assert r["comm_share_max"] == max(m["comm_share"] for m in recorded.members)
    assert "verdict_from_rank" not in r  # a recorded job keeps the whole run's verdict
    assert recorded.serving.get("members") is None  # ranks are no server workers


def test_json_carries_members_and_ranks(recorded: Diagnosis) -> None:
    data = json.loads(json.dumps(recorded.to_json(), allow_nan=False))
    assert [m["rank"] for m in data["members"]] == [0, 1] and data["ranks"]["ranks"] == 2
    back = Diagnosis.from_json(data)
    assert back.members == data["members"] and back.ranks == data["ranks"]
    assert Diagnosis.from_json({**data, "members": None, "ranks": None}).members == []  # older JSON


def test_a_single_process_run_has_no_members() -> None:
    d = diagnose(open_any(str(DATA / "traces" / "hta_v100_ddp_rank1.json.gz")))
    assert d.members == [] and d.ranks == {} and "members" in d.to_json()


def test_a_directory_of_rank_traces_is_each_rank_and_the_job(traced: Diagnosis) -> None:
    run = open_any(str(TRACES))
    assert isinstance(run, RankTraces) and len(run.rank_runs) == 2
    assert [m["rank"] for m in traced.members] == [0, 1]
    for m in traced.members:  # a sendrecv-heavy trace: each rank waits on the wire
        assert m["primary"] == "communication_bound" and m["margin"] is not None
        assert m["steps"] == 2 and m["step_p50_ms"] > 0
        assert m["comm_share"] == m["metrics"]["steady.comm_exposed_share"] > 0
    r = traced.ranks
    assert r["slowest_rank"] == r["verdict_from_rank"] == 1  # rank 1's steps are the longer ones
    slowest = next(m for m in traced.members if m["rank"] == 1)
    assert traced.primary == slowest["primary"]
    assert traced.run["imported_from"]["format"] == "ranks"


def test_rank_tables_in_console_and_report(traced: Diagnosis) -> None:
    text = render_text(traced, width=140)
    assert "ranks, each judged on its own" in text and "slowest rank 1" in text
    rows = rank_rows(traced)
    assert [r["rank"] for r in rows] == ["0", "1"] and rows[0]["collectives"].endswith("%")


def test_a_directory_of_one_trace_reads_as_that_trace(tmp_path: Path) -> None:
    shutil.copy(TRACES / "rank-0.json.gz", tmp_path / "rank-0.json.gz")
    run = open_any(str(tmp_path))
    assert not isinstance(run, RankTraces) and run.manifest["imported_from"]["format"] == "kineto"


def test_two_traces_of_one_rank_are_refused(tmp_path: Path) -> None:
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copy(TRACES / "rank-0.json.gz", tmp_path / name)
    with pytest.raises(DiagError, match="same rank"):
        open_any(str(tmp_path))


def test_an_empty_directory_is_still_no_run(tmp_path: Path) -> None:
    with pytest.raises(DiagError, match="not a diag run"):
        open_any(str(tmp_path))


def test_tui_overview_shows_the_rank_table(traced: Diagnosis) -> None:
    import asyncio

    from textual.widgets import Static
    from tui_support import wait_loaded

    from diag.tui import make_app
    from diag.tui.source import RunSource

    async def shown() -> str:
        app = make_app(RunSource(open_any(str(TRACES)), traced))
        app.animation_level = "none"
        async with app.run_test(size=(140, 50)) as pilot:
            await wait_loaded(pilot)
            return "\n".join(str(s.render()) for s in app.query(Static))

    text = asyncio.run(shown())
    assert "Ranks" in text and "slowest rank 1" in text and "communication_bound" in text
