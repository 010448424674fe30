"""How much does `diag profile` slow a program down?

Runs sample workloads with and without diag, interleaved (A B A B ...), and
reports the median ratio of the throughput each run prints about itself
(steps/s kept under diag: 1.0 means no overhead). Also times the bootstrap:
`python -c pass` with and without diag's sitecustomize on PYTHONPATH.

    python benchmarks/overhead.py [--seconds 10] [--repeats 3] [--device auto] [WORKLOAD ...]

Targets (issue 2): >= 0.99 on the H200, >= 0.97 on CPU, bootstrap < 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = re.compile(r"= ([0-9.]+) (\S+)/s on (\S+)")
DEFAULT_WORKLOADS = ("encoder_batch.py", "cnn_pipeline.py")


def throughput(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    m = RATE.search(out.stdout)
    if not m:
        raise RuntimeError(f"no throughput line from {' '.join(cmd)}:\n{out.stdout[-500:]}\n{out.stderr[-2000:]}")
    return float(m.group(1)), m.group(2)


def measure(workload: str, seconds: float, repeats: int, device: str, diag_args: list[str]) -> dict:
    target = [sys.executable, os.path.join(ROOT, "sample_workloads", workload), "--device", device,
              "--seconds", str(seconds)]
    plain, profiled = [], []
    unit = ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            rate, unit = throughput(target)
            plain.append(rate)
            out = os.path.join(tmp, f"run{i}")
            rate, unit = throughput([sys.executable, "-m", "diag", "profile", "--out", out, "--quiet",
                                     *diag_args, "--", *target])
            profiled.append(rate)
    ratios = [p / b for p, b in zip(profiled, plain, strict=True)]
    return {"workload": workload, "unit": f"{unit}/s", "without": plain, "with": profiled,
            "median_ratio": statistics.median(ratios)}


def bootstrap_cost(repeats: int = 15) -> dict:
    """Median wall time of `python -c pass` with and without the bootstrap."""
    from diag.collect.profile import BOOTSTRAP_DIR

    def run(env: dict[str, str]) -> float:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        return time.perf_counter() - t

    base = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        boot = dict(base, DIAG_RUN_DIR=tmp, PYTHONPATH=BOOTSTRAP_DIR, DIAG_OPTIONS="{}")
        plain, hooked = [], []
        for _ in range(repeats):
            plain.append(run(base))
            hooked.append(run(boot))
    return {"without_ms": statistics.median(plain) * 1e3, "with_ms": statistics.median(hooked) * 1e3,
            "added_ms": (statistics.median(hooked) - statistics.median(plain)) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workloads", nargs="*", default=list(DEFAULT_WORKLOADS))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--diag-args", default="", help="extra diag profile options, e.g. '--no-stacks'")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()
    results = {"bootstrap": bootstrap_cost(), "workloads": []}
    print(f"bootstrap: +{results['bootstrap']['added_ms']:.1f} ms on `python -c pass` "
          f"({results['bootstrap']['without_ms']:.1f} -> {results['bootstrap']['with_ms']:.1f} ms)", flush=True)
    for w in args.workloads:
        r = measure(w, args.seconds, args.repeats, args.device, args.diag_args.split())
        results["workloads"].append(r)
        print(f"{w}: throughput kept {r['median_ratio']:.3f} (median of {args.repeats}; "
              f"without {statistics.median(r['without']):.1f}, with {statistics.median(r['with']):.1f} {r['unit']})",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
