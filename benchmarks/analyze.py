"""Time and peak memory of `diag analyze` on a synthetic 1-hour run.

    .venv/bin/python benchmarks/analyze.py [--duration 3600] [--scenario gpu_compute] [--keep DIR] [--repeats 3]

Writes a run at the default sampling rates (host and GPU at 10 Hz, stacks at
100 Hz, ~200 steps/s) with diag/synthetic.py, then runs `diag analyze RUN
--json` in a fresh process `--repeats` times and reports the best wall time
and the peak RSS of that process (ru_maxrss of the child), plus an
in-process breakdown (load tables, phases, metrics, rules). Prints one JSON
line. Targets (issue 3): < 5 s and < 1 GB. Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TARGET_S = 5.0
TARGET_RSS = 1 << 30


def _child(run_dir: str) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one `diag analyze --json` process."""
    code = ("import resource, sys, time; t = time.perf_counter(); from diag.cli import main; "
            "rc = main(['analyze', sys.argv[1], '--json']); "
            "sys.stderr.write('WALL %f RSS %d\\n' % (time.perf_counter() - t, "
            "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, run_dir], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"diag analyze failed: {proc.stderr[-2000:]}")
    json.loads(proc.stdout)  # the output must be one JSON object
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("WALL ")][-1].split()
    return float(line[1]), int(line[3])


def _breakdown(run_dir: str) -> dict[str, float]:
    from diag.analysis.metrics import compute_metrics
    from diag.analysis.phases import compute_phases
    from diag.engine.diagnose import diagnose_metrics
    from diag.engine.rules import load_rules
    from diag.store.run import TABLES, open_run

    out: dict[str, float] = {}
    t = time.perf_counter()
    run = open_run(run_dir)
    rows = sum(len(run.table(name)) for name in TABLES)
    out["load_s"] = time.perf_counter() - t
    t = time.perf_counter()
    phases = compute_phases(run)
    out["phases_s"] = time.perf_counter() - t
    t = time.perf_counter()
    metrics = compute_metrics(run, phases)
    out["metrics_s"] = time.perf_counter() - t
    t = time.perf_counter()
    rules = load_rules()
    d = diagnose_metrics(run, phases, metrics, rules)
    out["rules_s"] = time.perf_counter() - t
    out["rows"] = rows
    out["primary"] = d.primary  # type: ignore[assignment]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--scenario", default="gpu_compute")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", help="write the run here and keep it")
    args = ap.parse_args(argv)
    from diag.synthetic import write_synthetic_run

    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="diag-bench-")
    run_dir = args.keep or os.path.join(tmp.name, "run")  # type: ignore[union-attr]
    t = time.perf_counter()
    write_synthetic_run(run_dir, args.duration, args.scenario)
    gen_s = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(run_dir, f)) for f in os.listdir(run_dir))
    runs = [_child(run_dir) for _ in range(args.repeats)]
    wall = min(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    result = {"duration_s": args.duration, "scenario": args.scenario, "run_bytes": size,
              "generate_s": round(gen_s, 2), "analyze_wall_s": round(wall, 3),
              "analyze_peak_rss_mb": round(rss / 2**20, 1), "targets": {"wall_s": TARGET_S, "rss_mb": TARGET_RSS >> 20},
              "in_process": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in _breakdown(run_dir).items()},
              "python": sys.version.split()[0], "cpus": os.cpu_count()}
    print(json.dumps(result))
    if tmp:
        tmp.cleanup()
    return 0 if wall < TARGET_S and rss < TARGET_RSS else 1


if __name__ == "__main__":
    sys.exit(main())
