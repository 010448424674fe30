"""Size and render time of the HTML report of a 1-hour synthetic run.

    .venv/bin/python benchmarks/report_size.py [--duration 3600] [--scenario gpu_compute] [--keep DIR]

Prints one JSON line: build seconds (data + HTML), file size (inline and
--cdn), and the time headless Chromium takes from navigation to every chart
drawn (wall and renderer CPU seconds, best of 5), next to the same figures
for a page holding plotly.js alone. Targets (issue 5): < 8 MB and < 2 s.
Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from diag.engine.diagnosis import Diagnosis, Evidence, Finding, Phase, Recommendation
from diag.report import build_report_data, render_html
from diag.store.run import open_run
from diag.synthetic import SCENARIOS, write_synthetic_run

MAX_BYTES = 8 * 1024 * 1024
MAX_RENDER_S = 2.0
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
ALL_DRAWN = """() => {
  const divs = [...document.querySelectorAll('.plotly-graph-div')];
  return divs.length > 0 && divs.every(d => d.querySelector('.main-svg'));
}"""


def diagnosis_for(run) -> Diagnosis:
    """The engine's diagnosis when it is there; a fixed stand-in otherwise (same size of data)."""
    try:
        from diag.engine import diagnose  # type: ignore[attr-defined]

        return diagnose(run)
    except ImportError:
        d = run.duration_s
        return Diagnosis(
            run={"command": run.manifest.get("command"), "duration_s": d}, primary="compute_bound",
            scores={"compute_bound": 0.8, "cpu_bound": 0.3},
            phases=[Phase("startup", 0, 4.5), Phase("warmup", 4.5, 5.0), Phase("steady", 5.0, d)],
            findings=[Finding("gpu.busy", "compute_bound", "high", "GEMMs keep the tensor cores busy", 0.8,
                              [Evidence("steady.gpu_busy", 0.86, "ratio", "> 0.7")],
                              [Recommendation("Try torch.compile.", "model = torch.compile(model)", "up to 30%")])],
            metrics={"steady.inside_model_share": 0.6, "steady.outside_model_share": 0.4,
                     "steady.copy_share": 0.08, "steady.sync_share": 0.02, "steady.gpu_idle_share": 0.14},
        )


def render_seconds(html_path: str, repeats: int = 5) -> tuple[float, float]:
    """Best of `repeats`, each in a fresh context: wall seconds from navigation to every
    chart's SVG in the DOM, and the CPU seconds Chromium's renderer spent on it.

    The CPU figure barely moves when other work shares the machine; the wall figure does.
    """
    from playwright.sync_api import sync_playwright

    best_wall = best_cpu = float("inf")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        cdp = browser.new_browser_cdp_session()

        def renderer_cpu() -> dict[int, float]:
            info = cdp.send("SystemInfo.getProcessInfo")["processInfo"]
            return {pr["id"]: pr["cpuTime"] for pr in info if pr["type"] == "renderer"}

        try:
            for _ in range(repeats):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                page = context.new_page()
                page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://") else r.abort())
                page.goto("about:blank")
                before = renderer_cpu()
                t0 = time.perf_counter()
                page.goto("file://" + os.path.abspath(html_path), wait_until="load")
                page.wait_for_function(ALL_DRAWN, timeout=60_000)
                best_wall = min(best_wall, time.perf_counter() - t0)
                after = renderer_cpu()
                best_cpu = min(best_cpu, sum(c - before.get(pid, 0.0) for pid, c in after.items()))
                context.close()
        finally:
            browser.close()
    return best_wall, best_cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--scenario", default="gpu_compute", choices=SCENARIOS)
    ap.add_argument("--keep", help="write the run and report here instead of a temporary folder")
    args = ap.parse_args(argv)

    folder = args.keep or tempfile.mkdtemp(prefix="diag-report-bench-")
    os.makedirs(folder, exist_ok=True)
    run_dir = os.path.join(folder, "run")
    t = time.perf_counter()
    write_synthetic_run(run_dir, args.duration, args.scenario)
    synth_s = time.perf_counter() - t

    run = open_run(run_dir)
    diagnosis = diagnosis_for(run)
    t = time.perf_counter()
    data = build_report_data(run, diagnosis)
    data_s = time.perf_counter() - t
    t = time.perf_counter()
    html = render_html(data)
    html_s = time.perf_counter() - t
    cdn_html = render_html(data, cdn=True)
    out = os.path.join(folder, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(html)

    result = {
        "scenario": args.scenario, "duration_s": args.duration, "synthetic_run_s": round(synth_s, 2),
        "data_s": round(data_s, 2), "html_s": round(html_s, 2),
        "bytes": len(html.encode()), "mb": round(len(html.encode()) / 2**20, 2),
        "cdn_bytes": len(cdn_html.encode()), "report": out,
    }
    if os.path.exists(CHROMIUM):
        wall, cpu = render_seconds(out)
        result["render_s"], result["render_cpu_s"] = round(wall, 3), round(cpu, 3)
        # The same page with plotly.js alone: what loading the library costs on this machine,
        # so a busy machine's figure can be read against it.
        from diag.report.render import _plotlyjs

        bare = os.path.join(folder, "plotlyjs-only.html")
        with open(bare, "w", encoding="utf-8") as f:
            f.write("<!DOCTYPE html><html><head><script>" + _plotlyjs() + "</script></head><body>"
                    "<div class='plotly-graph-div'><svg class='main-svg'></svg></div></body></html>")
        wall, cpu = render_seconds(bare)
        result["plotlyjs_only_s"], result["plotlyjs_only_cpu_s"] = round(wall, 3), round(cpu, 3)
        result["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    ok = result["bytes"] < MAX_BYTES and result.get("render_s", 0.0) < MAX_RENDER_S
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
