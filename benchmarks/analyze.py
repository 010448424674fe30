"""Time and peak memory of `diag analyze` on a synthetic 1-hour run.

    .venv/bin/python benchmarks/analyze.py [--duration 3600] [--scenario gpu_compute] [--keep DIR] [--repeats 3]
    .venv/bin/python benchmarks/analyze.py --duration 1800 --run DIR --before OLD_TREE --repeats 7

Writes a run at the default sampling rates (host and GPU at 10 Hz, stacks at
100 Hz, ~200 steps/s) with diag/synthetic.py (or reads `--run DIR`), then runs
`diag analyze RUN --json` in a fresh process `--repeats` times and reports the
best wall time and the peak RSS of that process (ru_maxrss of the child), plus
an in-process breakdown (load tables, phases, metrics, rules). Prints one JSON
line. Targets (issue 3): < 5 s and < 1 GB. Exits 1 if a target is missed.

With `--before TREE` (another checkout, e.g. a git worktree of an older
commit) both trees analyze the same run, alternately (this tree, then TREE,
`--repeats` rounds), each call a fresh process with that tree first on
PYTHONPATH; it prints the median wall and median breakdown of each tree and
their ratio (after / before). Exits 0 when the ratio is <= 1.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 5.0
TARGET_RSS = 1 << 30
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One `diag analyze --json` call, timed from before the import to the end.
_WALL = ("import resource, sys, time; t = time.perf_counter(); from diag.cli import main; "
         "rc = main(['analyze', sys.argv[1], '--json']); "
         "u = resource.getrusage(resource.RUSAGE_SELF); "
         "sys.stderr.write('WALL %f RSS %d CPU %f\\n' % (time.perf_counter() - t, u.ru_maxrss * 1024, "
         "u.ru_utime + u.ru_stime)); sys.exit(rc)")

# The same work in steps (each tree has these functions), timed step by step.
_STEPS = """
import json, sys, time
from diag.analysis.metrics import compute_metrics
from diag.analysis.phases import compute_phases
from diag.engine.diagnose import diagnose_metrics
from diag.engine.rules import load_rules
from diag.store.run import TABLES, open_run
out = {}
t = time.perf_counter()
run = open_run(sys.argv[1])
rows = sum(len(run.table(name)) for name in TABLES)
out["load_s"] = time.perf_counter() - t
t = time.perf_counter()
phases = compute_phases(run)
out["phases_s"] = time.perf_counter() - t
t = time.perf_counter()
metrics = compute_metrics(run, phases)
out["metrics_s"] = time.perf_counter() - t
t = time.perf_counter()
d = diagnose_metrics(run, phases, metrics, load_rules())
out["rules_s"] = time.perf_counter() - t
out["rows"] = rows
out["primary"] = d.primary
print(json.dumps(out))
"""


def _env(tree: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def _child(run_dir: str, tree: str = HERE) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (bytes) and CPU seconds of one `diag analyze --json` process of `tree`
    (CPU time, user + system, is the steadier figure on a shared box)."""
    proc = subprocess.run([sys.executable, "-c", _WALL, run_dir], capture_output=True, text=True, check=False,
                          cwd=tree, env=_env(tree))
    if proc.returncode != 0:
        raise SystemExit(f"diag analyze failed: {proc.stderr[-2000:]}")
    json.loads(proc.stdout)  # the output must be one JSON object
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("WALL ")][-1].split()
    return float(line[1]), int(line[3]), float(line[5])


def _breakdown(run_dir: str, tree: str = HERE) -> dict[str, float]:
    """Seconds of load / phases / metrics / rules in one fresh process of `tree`."""
    proc = subprocess.run([sys.executable, "-c", _STEPS, run_dir], capture_output=True, text=True, check=False,
                          cwd=tree, env=_env(tree))
    if proc.returncode != 0:
        raise SystemExit(f"breakdown failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def _median(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = [k for k, v in rows[0].items() if isinstance(v, float)]
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in keys}


def _side_by_side(run_dir: str, before: str, repeats: int) -> dict[str, object]:
    """Both trees on one run, interleaved: medians per tree and the ratio after / before."""
    trees = {"after": HERE, "before": os.path.abspath(before)}
    walls: dict[str, list[float]] = {k: [] for k in trees}
    rss: dict[str, list[int]] = {k: [] for k in trees}
    cpu: dict[str, list[float]] = {k: [] for k in trees}
    parts: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    for i in range(repeats):
        order = list(trees) if i % 2 == 0 else list(trees)[::-1]  # neither tree always goes first
        for name in order:
            w, r, c = _child(run_dir, trees[name])
            walls[name].append(w)
            rss[name].append(r)
            cpu[name].append(c)
            parts[name].append(_breakdown(run_dir, trees[name]))
    out: dict[str, object] = {}
    for name in trees:
        out[name] = {"tree": trees[name], "wall_s_median": round(statistics.median(walls[name]), 3),
                     "wall_s": [round(w, 2) for w in walls[name]],
                     "cpu_s_median": round(statistics.median(cpu[name]), 3),
                     "peak_rss_mb_median": round(statistics.median(rss[name]) / 2**20, 1),
                     "in_process_median": _median(parts[name])}
    out["ratio"] = round(statistics.median(walls["after"]) / statistics.median(walls["before"]), 3)
    out["cpu_ratio"] = round(statistics.median(cpu["after"]) / statistics.median(cpu["before"]), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--scenario", default="gpu_compute")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", help="write the run here and keep it")
    ap.add_argument("--run", help="analyze this existing run instead of writing one")
    ap.add_argument("--before", help="another diag tree to compare with, side by side")
    args = ap.parse_args(argv)

    tmp = None if args.keep or args.run else tempfile.TemporaryDirectory(prefix="diag-bench-")
    run_dir = args.run or args.keep or os.path.join(tmp.name, "run")  # type: ignore[union-attr]
    gen_s = 0.0
    if not args.run:
        from diag.synthetic import write_synthetic_run

        t = time.perf_counter()
        write_synthetic_run(run_dir, args.duration, args.scenario)
        gen_s = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(run_dir, f)) for f in os.listdir(run_dir)
               if os.path.isfile(os.path.join(run_dir, f)))
    if args.before:
        result: dict[str, object] = {"run": run_dir, "run_bytes": size, "repeats": args.repeats,
                                     **_side_by_side(run_dir, args.before, args.repeats),
                                     "python": sys.version.split()[0], "cpus": os.cpu_count()}
        print(json.dumps(result))
        if tmp:
            tmp.cleanup()
        return 0 if result["ratio"] <= 1.0 else 1  # type: ignore[operator]
    runs = [_child(run_dir) for _ in range(args.repeats)]
    wall = min(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    if args.run:  # what the run says of itself, not the options' defaults
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as f:
            args.duration, args.scenario = json.load(f).get("duration_s"), "(given run)"
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
