"""One latency computation: Overview, Latency screen, report and `diag analyze --json` agree on a recorded run."""

from __future__ import annotations

import json
import os

import pytest

from diag.analysis.latency import PERCENTILES
from diag.cli import main
from diag.engine import diagnose
from diag.report import build_report_data
from diag.store.run import open_run
from diag.tui.source import RunSource
from diag.tui.views.latency import LatencyView
from diag.tui.views.overview import OverviewView

RUN = os.path.join(os.path.dirname(__file__), "data", "gpu", "encoder_server")  # steps and requests


@pytest.mark.skipif(not os.path.isdir(RUN), reason="recorded run not present")
def test_every_view_shows_the_same_percentiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", RUN, "--json"]) == 0
    json_metrics = json.loads(capsys.readouterr().out)["metrics"]
    run = open_run(RUN)
    source = RunSource(run, diagnose(run))
    overview = OverviewView(source).load(source).diagnosis.metrics
    screen = LatencyView(source).load(source).summary.set_index("kind")
    report = {k["kind"]: k for k in build_report_data(run, source.diagnosis())["latency"]["kinds"]}
    assert set(screen.index) == set(report) == {"step", "request"}
    for kind in ("step", "request"):
        for p in PERCENTILES:  # JSON numbers are rounded: agree to 1e-6
            name = f"steady.{kind}_p{p}_ms"
            value = json_metrics[name]
            assert value is not None and value > 0, name
            assert overview[name] == pytest.approx(value, rel=1e-6), name
            assert screen.loc[kind, f"p{p}_ms"] == pytest.approx(value, rel=1e-6), name
            assert report[kind]["summary"][f"p{p}_ms"] == pytest.approx(value, rel=1e-6), name
            assert report[kind]["percentiles"][f"p{p}"] == pytest.approx(value, rel=1e-6), name
        # the histograms show the calls the percentiles cover
        assert sum(report[kind]["histogram"]["counts"]) + report[kind]["histogram"]["above"] == screen.loc[kind, "count"]
