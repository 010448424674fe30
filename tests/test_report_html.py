"""The rendered page: one plotly.js, fixed chart ids, every target string escaped."""

from __future__ import annotations

import re

import pytest
from report_fixtures import PAYLOAD, make_diagnosis, write_hostile_run

from diag.report import build_report_data, render_html
from diag.report.render import environment, plotly_cdn
from diag.store.run import open_run
from diag.synthetic import write_synthetic_run

GPU_CHARTS = {"fig-timeline", "fig-breakdown", "fig-stacks", "fig-kernels", "fig-latency-request", "fig-latency-step"}


@pytest.fixture(scope="module")
def gpu_data(tmp_path_factory):
    path = write_synthetic_run(str(tmp_path_factory.mktemp("gpu") / "run"), 30.0, "gpu_compute")
    return build_report_data(open_run(path), make_diagnosis(30.0))


@pytest.fixture(scope="module")
def hostile_html(tmp_path_factory):
    path = write_hostile_run(str(tmp_path_factory.mktemp("evil") / "run"), 20.0)
    data = build_report_data(open_run(path), make_diagnosis(20.0, hostile=PAYLOAD))
    # The CDN page has no plotly.js bundle, so every byte left is ours or the target's.
    return render_html(data, cdn=True)


def _chart_ids(html: str) -> set[str]:
    return set(re.findall(r'<div id="(fig-[a-z-]+)" class="plotly-graph-div"', html))


def test_autoescape_is_on_for_every_template():
    env = environment()
    assert env is environment()  # one environment
    for name in env.list_templates():
        assert env.get_template(name).environment.autoescape is True


def test_inline_page_has_plotly_once_and_every_chart(gpu_data):
    html = render_html(gpu_data)
    assert html.count("plotly.js v") == 1
    assert 'src="https://cdn.plot.ly' not in html
    assert _chart_ids(html) == GPU_CHARTS
    # Each chart's own script must not pull plotly.js in again.
    # The head's two (plotly config, plotly.js), then one per chart.
    assert html.count("<script") == 2 + len(GPU_CHARTS)


def test_cdn_page_is_small_and_loads_plotly_with_integrity(gpu_data):
    html = render_html(gpu_data, cdn=True)
    cdn = plotly_cdn()
    assert "plotly.js v" not in html
    assert f'src="{cdn["url"]}" integrity="{cdn["integrity"]}"' in html
    assert cdn["url"].startswith("https://cdn.plot.ly/plotly-")
    assert len(html.encode()) < 1_000_000
    assert _chart_ids(html) == GPU_CHARTS


def test_content_sections_present(gpu_data):
    html = render_html(gpu_data, cdn=True)
    for anchor in ("verdict", "findings", "timeline", "latency", "breakdown", "stacks", "gpu", "environment"):
        assert f'<section id="{anchor}">' in html
    assert "<pre><code>model = torch.compile(model, mode=&#39;max-autotune&#39;)</code></pre>" in html
    assert "Expected gain: up to 30% of step time" in html
    assert "580.159.04" in html and "CUDA_VISIBLE_DEVICES" in html


def test_cpu_run_renders_reasons_not_empty_charts(tmp_path):
    path = write_synthetic_run(str(tmp_path / "run"), 10.0, "cpu_preprocess")
    html = render_html(build_report_data(open_run(path), make_diagnosis(10.0, primary="cpu_bound")), cdn=True)
    assert "No GPU series: the gpu collector was unavailable (NVML: driver not loaded)." in html
    assert "No kernel data: the kernels collector was off (no CUDA device)." in html
    assert "fig-kernels" not in _chart_ids(html)
    assert {"fig-timeline", "fig-stacks"} <= _chart_ids(html)


def test_hostile_strings_are_escaped(hostile_html):
    html = hostile_html
    lowered = html.lower()
    assert PAYLOAD not in html
    assert "<img" not in lowered
    # Exactly our scripts open and close: the head's two (config, CDN loader), one per chart.
    assert lowered.count("</script") == lowered.count("<script") == 2 + len(_chart_ids(html))
    # The payload is there, as text: escaped in HTML and as \u003c in the charts' JSON.
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html
    assert "\\u003c\\u002fscript\\u003e" in html


def test_hostile_strings_reach_every_place_escaped(hostile_html):
    escaped = "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    # argv in the header and the environment table, a kernel name, a frame, an env value, a reason.
    assert hostile_html.count(escaped) >= 6
    # Icicle labels are HTML-escaped for plotly's own markup, then JSON-escaped by plotly.
    assert "&lt;\\u002fscript&gt;&lt;img src=x onerror=alert(1)&gt; (evil.py:1)" in hostile_html


def test_plotly_bundle_cannot_end_its_script():
    from diag.report.render import _plotlyjs

    assert "</script" not in _plotlyjs().lower()


def test_engine_diagnosis_renders(tmp_path):
    # End to end with the real engine, where it is importable.
    engine = pytest.importorskip("diag.engine")
    if not hasattr(engine, "diagnose"):
        pytest.skip("diag.engine.diagnose not there yet")
    run = open_run(write_synthetic_run(str(tmp_path / "run"), 20.0, "cpu_preprocess"))
    diagnosis = engine.diagnose(run)
    data = build_report_data(run, diagnosis)
    html = render_html(data, cdn=True)
    assert data["verdict"]["label"] == diagnosis.primary
    assert len(data["findings"]) == len(diagnosis.findings)
    assert {"fig-timeline", "fig-stacks", "fig-breakdown"} <= _chart_ids(html)


def test_run_with_no_tables_still_reports(tmp_path):
    # A run killed right after it started: a manifest, no tables, no phases, no verdict.
    from diag.engine.diagnosis import Diagnosis
    from diag.store.manifest import write_manifest

    write_manifest(str(tmp_path), {"schema": "diag.run/1", "command": ["python", "x.py"], "start_ns": 10**18,
                                   "end_ns": 10**18 + 10**9, "partial": True})
    diagnosis = Diagnosis(run={}, primary=None, scores={}, phases=[], findings=[], metrics={})
    html = render_html(build_report_data(open_run(str(tmp_path)), diagnosis), cdn=True)
    assert _chart_ids(html) == set()
    assert "partial run" in html and "no verdict" in html
    for reason in ("No time series were recorded.", "No steps or requests were recorded",
                   "No Python stack samples: the stacks collector did not report.", "No findings."):
        assert reason in html
