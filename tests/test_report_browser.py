"""The report in headless Chromium: offline, every chart drawn, no errors, no network, no alert."""

from __future__ import annotations

import os

import pytest
from report_fixtures import PAYLOAD, make_diagnosis, write_hostile_run

from diag.report import write_report
from diag.store.run import open_run
from diag.synthetic import write_synthetic_run

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium at /usr/bin/chromium")]

ALL_DRAWN = """() => {
  const divs = [...document.querySelectorAll('.plotly-graph-div')];
  return divs.length > 0 && divs.every(d => d.querySelector('.main-svg'));
}"""


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _report(tmp_path_factory, scenario: str, hostile: bool = False) -> str:
    folder = tmp_path_factory.mktemp(scenario)
    duration = 20.0
    if hostile:
        path = write_hostile_run(str(folder / "run"), duration)
    else:
        path = write_synthetic_run(str(folder / "run"), duration, scenario)
    diagnosis = make_diagnosis(duration, hostile=PAYLOAD if hostile else "")
    return write_report(open_run(path), diagnosis, str(folder / "report.html"))


def _open(browser, html_path: str, wait: bool = True):
    """Open the report with every request routed; return the page and what it tried."""
    seen = {"requests": [], "console_errors": [], "page_errors": [], "dialogs": []}
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    def route(r):
        url = r.request.url
        if url.startswith("file://"):
            r.continue_()
        else:
            seen["requests"].append(url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: seen["console_errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["page_errors"].append(str(e)))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    page.goto("file://" + os.path.abspath(html_path), wait_until="load")
    if wait:
        page.wait_for_function(ALL_DRAWN, timeout=30_000)
    return page, seen


def _check_clean(page, seen, expected: set[str]) -> None:
    ids = set(page.eval_on_selector_all(".plotly-graph-div", "ds => ds.map(d => d.id)"))
    assert ids == expected
    for div_id in ids:
        assert page.locator(f"#{div_id} .main-svg").count() >= 1, div_id
    assert seen["requests"] == []
    assert seen["console_errors"] == []
    assert seen["page_errors"] == []
    assert seen["dialogs"] == []


def test_gpu_report_renders_offline(browser, tmp_path_factory):
    page, seen = _open(browser, _report(tmp_path_factory, "gpu_compute"))
    try:
        _check_clean(page, seen, {"fig-timeline", "fig-breakdown", "fig-stacks", "fig-kernels",
                                  "fig-latency-request", "fig-latency-step"})
        # One zoom moves every timeline panel: the panels share one time axis.
        ranges = page.evaluate("""async () => {
          const div = document.getElementById('fig-timeline');
          await Plotly.relayout(div, {'xaxis.range': [6, 9]});
          const fl = div._fullLayout;
          return Object.keys(fl).filter(k => /^xaxis\\d*$/.test(k)).map(k => fl[k].range);
        }""")
        assert len(ranges) >= 5
        for r in ranges:
            assert r == pytest.approx([6, 9])
    finally:
        page.close()


def test_cpu_report_renders_offline(browser, tmp_path_factory):
    page, seen = _open(browser, _report(tmp_path_factory, "cpu_preprocess"))
    try:
        _check_clean(page, seen, {"fig-timeline", "fig-breakdown", "fig-stacks", "fig-latency-request",
                                  "fig-latency-step"})
        assert "No GPU series" in page.inner_text("#timeline")
    finally:
        page.close()


def test_hostile_names_fire_nothing(browser, tmp_path_factory):
    page, seen = _open(browser, _report(tmp_path_factory, "gpu_compute", hostile=True))
    try:
        _check_clean(page, seen, {"fig-timeline", "fig-breakdown", "fig-stacks", "fig-kernels",
                                  "fig-latency-request", "fig-latency-step"})
        assert page.locator("img").count() == 0
        # Shown as text where the target's strings appear: argv, a kernel, an env value.
        assert PAYLOAD in page.inner_text("header")
        assert PAYLOAD in page.inner_text("#gpu")
        assert PAYLOAD in page.inner_text("#environment")
        # And in the icicle, as a label, not as markup.
        labels = page.eval_on_selector_all("#fig-stacks text", "ts => ts.map(t => t.textContent)")
        assert any(PAYLOAD in t for t in labels)
    finally:
        page.close()


def test_network_guard_catches_the_cdn_page(browser, tmp_path_factory):
    # The --cdn page does load plotly.js from the network: the guard must see it (so the offline
    # tests above would see any request too).
    folder = tmp_path_factory.mktemp("cdn")
    path = write_synthetic_run(str(folder / "run"), 10.0, "cpu_preprocess")
    html = write_report(open_run(path), make_diagnosis(10.0), str(folder / "cdn.html"), cdn=True)
    page, seen = _open(browser, html, wait=False)
    try:
        assert any(u.startswith("https://cdn.plot.ly/plotly-") for u in seen["requests"])
    finally:
        page.close()
