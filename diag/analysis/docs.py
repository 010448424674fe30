"""docs/metrics.md, generated from the metric catalog: `python -m diag.analysis.docs`."""

from __future__ import annotations

import pathlib

from diag.analysis.metrics import CATALOG

_GROUPS = [
    ("run.", "Run"), ("startup.", "Startup"), ("warmup.", "Warm-up"), ("coldstart.", "Cold start"),
    ("steady.", "Steady state"), ("ort.", "ONNX Runtime"), ("load.", "Load (diag load, diag profile --load)"),
    ("trace.", "Imported traces"),
]

_INTRO = """# Metrics

Every number diag's rules and views use, computed by `diag/analysis/` from a
run's tables (docs/run-format.md). Metrics describe the **steady state**
unless their name starts with `startup.`, `warmup.`, `coldstart.`, `run.` or
`ort.`. A metric the run holds no data for is `null` in the JSON output, and a
rule that needs it does not fire.

Phases: *startup* runs from process start to the end of the first step (or
request); *warm-up* lasts until step latency settles (the 5-step rolling
median stays within 25% of the median of the second half of the steps);
*steady* is the rest, up to the end of the last step or request. The
*stepping thread* is the thread that spends the most time inside steps.

Units: `ratio` is a fraction (0.25 = 25%), `factor` is how many times one
value is another (3.0 = 3.00x), `flag` is 0 or 1, `cores` counts CPU cores
(1 = one core busy).

This page is generated from the catalog (`python -m diag.analysis.docs`);
a test keeps the two in sync.
"""


def metrics_markdown() -> str:
    """The text of docs/metrics.md."""
    out = [_INTRO]
    for prefix, title in _GROUPS:
        rows = [m for m in CATALOG if m.name.startswith(prefix)]
        if not rows:
            continue
        out.append(f"\n## {title}\n\n| metric | unit | meaning |\n|---|---|---|")
        out += [f"| `{m.name}` | {m.unit} | {m.doc} |" for m in rows]
    return "\n".join(out) + "\n"


def main() -> None:
    path = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
    path.write_text(metrics_markdown())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
