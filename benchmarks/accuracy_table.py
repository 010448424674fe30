"""Print the accuracy tables of docs/accuracy.md from the recorded H200 runs.

    python benchmarks/accuracy_table.py

Diagnoses every run under tests/data/gpu/ (sample workloads) and
tests/data/gpu_heldout/ (held-out workloads) with the current rules, and
prints one Markdown row per run: workload, expected, got, top scores, the
rules that fired.
"""

from __future__ import annotations

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from accuracy_expected import EXPECTED  # noqa: E402

from diag.engine import diagnose  # noqa: E402
from diag.store.run import open_run  # noqa: E402


def _heldout_expected() -> dict:
    spec = importlib.util.spec_from_file_location("heldout_expected",
                                                  os.path.join(ROOT, "benchmarks", "heldout", "expected.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EXPECTED


def rows(folder: str, expected: dict) -> list[str]:
    out = ["| workload | expected | got | top scores | rules that fired |", "|---|---|---|---|---|"]
    base = os.path.join(ROOT, "tests", "data", folder)
    for name in sorted(os.listdir(base)):
        d = diagnose(open_run(os.path.join(base, name)))
        want = expected[name]["cuda"][0]
        ok = d.primary == want or (want is None and max(d.scores.values(), default=0) <= 0.3)
        top = ", ".join(f"{k} {v:.2f}" for k, v in sorted(d.scores.items(), key=lambda kv: -kv[1])[:3] if v > 0)
        fired = ", ".join(sorted({f.rule for f in d.findings if f.label}))
        out.append(f"| {name} | {want or 'none'} | {d.primary or 'none'} {'✓' if ok else '✗'} | {top or '–'} | {fired} |")
    return out


def main() -> None:
    print("### Sample workloads, H200\n")
    print("\n".join(rows("gpu", EXPECTED)))
    print("\n### Held-out workloads, H200\n")
    print("\n".join(rows("gpu_heldout", _heldout_expected())))


if __name__ == "__main__":
    main()
