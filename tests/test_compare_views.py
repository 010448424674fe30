"""The comparison's views: TUI snapshot, HTML offline page, console rows; from a stored comparison
(tests/data/compare/, `diag compare ranker_mlp ranker_graph --json` on the H200 runs)."""

from __future__ import annotations

import json
import os
import re

import pytest
from tui_support import sync

from diag.report.compare import render_compare_html
from diag.report.render import environment
from diag.tui.compare import make_compare_app
from diag.views import compare as rows

STORED = os.path.join(os.path.dirname(__file__), "data", "compare", "ranker_mlp_vs_graph.json")


@pytest.fixture(scope="module")
def stored() -> dict:
    with open(STORED, encoding="utf-8") as f:
        return json.load(f)


def test_tui_snapshot(snap_compare, stored):
    assert snap_compare(make_compare_app(stored, stored["gate"]), terminal_size=(110, 40))


@sync
async def test_tui_toggles_all_metrics(stored):
    app = make_compare_app(stored, stored["gate"])
    async with app.run_test(size=(110, 40)) as pilot:
        table = app.query_one("#table-metrics")
        moved = table.row_count
        await pilot.press("a")
        assert table.row_count == len(stored["metrics"]) > moved
        assert app.query_one("#table-budgets").row_count == 2


def test_html_is_offline_with_one_plotly_and_escaped(stored):
    evil = json.loads(json.dumps(stored))
    evil["warnings"].append("<script>alert(1)</script>")
    evil["a"][0]["path"] = "</code><img src=x onerror=alert(1)>"
    html = render_compare_html(evil, evil["gate"])
    assert html.count("plotly.js v") == 1
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html
    assert "<img src=x" not in html
    # nothing loads from anywhere but the page: no src/href to another host outside plotly.js itself
    ours = html.replace(html[html.index("plotly.js v"):html.index("</script>", html.index("plotly.js v"))], "")
    assert 'src="https://cdn.plot.ly' not in html and not re.findall(r'(?:src|href)="(?:https?:)?//', ours)
    assert "default-src 'none'" in html
    assert re.findall(r'<div id="(fig-[a-z-]+)" class="plotly-graph-div"', html) == ["fig-compare-step"]
    for anchor in ("verdict", "figures", "metrics", "predictions", "environment", "budgets"):
        assert f'<section id="{anchor}">' in html
    assert "inside the bound" in html and "BROKEN" in html


def test_html_template_shares_the_report_environment():
    env = environment()
    assert env.get_template("compare.html.j2").environment is env and env.autoescape is True


def test_rows_use_the_one_formatter(stored):
    steps = next(f for f in stored["figures"] if f["metric"] == "steady.steps_per_s")
    first = rows.figure_rows(stored)[0]
    assert first[0] == "steps/s" and first[1] == "362/s" and first[5] == "faster"
    assert rows.change_text(steps) == f"{steps['change'] + 1:.2f}x"
    assert [g[2] for g in rows.gate_rows(stored["gate"])] == ["held", "BROKEN"]


def test_cli_writes_the_html(tmp_path, capsys):
    from diag.cli import main

    data = os.path.join(os.path.dirname(__file__), "data", "gpu", "ranker_mlp")
    out = tmp_path / "compare.html"
    assert main(["compare", data, data, "-o", str(out)]) == 0
    assert out.read_text().count("plotly.js v") == 1
    assert "no detectable change" in capsys.readouterr().out
    assert main(["compare", data, data, "-o", str(tmp_path / "no" / "such" / "dir.html")]) == 2
