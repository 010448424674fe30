"""Predicted vs realised gain on the fixed twins, as a markdown table for docs/accuracy.md.

    python benchmarks/twins.py --device cuda --runs 3 --seconds 20 --out /tmp/twins
    python benchmarks/twins.py --device cpu --runs 1 --seconds 4 --only mlp_batch   # a quick check
    python benchmarks/twins.py --reuse --runs 1 --out RUNS   # compare runs recorded elsewhere, with today's rules

For each (workload, fixed twin) pair: N runs of each under `diag profile`, then
`diag compare BEFORE/ AFTER/ --json` (each side a directory of its N runs), and
one row: the workload's verdict, the top recommendation's predicted gain (bound
and point, on what it speaks of), the realised gain with its 95% interval,
and whether it fell inside the bound and within 25% of the point. Runs are kept
under --out (the raw/ folders dropped, so a pair can be copied to tests/data).
Exit code: 0, or 1 when a run or a compare failed (the table still prints).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.path.join(ROOT, "sample_workloads")

# name -> (what the twin changes, original script, twin script)
PAIRS: dict[str, tuple[str, str, str]] = {
    "ranker_mlp": ("CUDA graph", "ranker_mlp.py", "ranker_graph.py"),
    "mlp_batch": ("pinned + non_blocking copies", "mlp_batch.py", "twins/mlp_batch_pinned.py"),
    "shard_embedder": ("DataLoader workers, prefetch", "shard_embedder.py", "twins/shard_embedder_prefetch.py"),
    "encoder_server": ("micro-batcher", "encoder_server.py", "twins/encoder_server_batched.py"),
}


def profile(script: str, out: str, device: str, seconds: float, python: str) -> int:
    """One run of `script` under diag profile into `out`; returns diag's exit code (the program's)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [python, "-m", "diag", "profile", "--quiet", "--out", out, "--",
           python, os.path.join(W, script), "--device", device, "--seconds", str(seconds)]
    rc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                        timeout=seconds * 6 + 180).returncode
    shutil.rmtree(os.path.join(out, "raw"), ignore_errors=True)  # sealed into Parquet already
    return rc


def compare(before: str, after: str, python: str) -> dict[str, Any] | None:
    proc = subprocess.run([python, "-m", "diag", "compare", before, after, "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        print(f"compare {before} {after}: {proc.stderr.strip()}", file=sys.stderr)
        return None
    return json.loads(proc.stdout)


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}x"


def row(name: str, fix: str, c: dict[str, Any] | None) -> str:
    if c is None:
        return f"| {name} | {fix} | – | – | – | – | run or compare failed | |"
    before = c["verdict"]["a"]["primary"] or "none"
    p = next((p for p in c["predictions"] if p["primary"]), None)
    if p is None:
        return f"| {name} | {fix} | {before} | no numeric gain | | | | |"
    ci = p["realised_ci"]
    real = _x(p["realised"]) + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    inside = {True: "yes", False: "**no**", None: "–"}[p["within_bound"]]
    near = {True: "yes", False: "**no**", None: "–"}[p["near_point"]]
    on = p["gain_on"].replace("_", " ")
    return (f"| {name} | {fix} | {before} (`{p['rule']}`) | ≤ {_x(p['gain_max'])} {on} | {_x(p['gain_point'])} "
            f"| {real} | {inside} | {near} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--runs", type=int, default=3, help="runs of each program per side")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds each program runs")
    ap.add_argument("--out", default="twins-runs", help="folder for the runs")
    ap.add_argument("--only", action="append", choices=sorted(PAIRS), help="just these pairs")
    ap.add_argument("--python", default=sys.executable, help="the interpreter that runs diag and the programs")
    ap.add_argument("--reuse", action="store_true",
                    help="keep runs already under --out (e.g. recorded on a GPU host) and only compare them")
    args = ap.parse_args(argv)
    failed = False
    lines = ["| workload | fix applied | verdict before (rule) | predicted bound | point | realised [95% CI] "
             "| inside bound | within 25% of point |", "|---|---|---|---|---|---|---|---|"]
    for name in args.only or PAIRS:
        fix, original, twin = PAIRS[name]
        sides = {}
        for side, script in (("before", original), ("after", twin)):
            folder = os.path.join(args.out, name, side)
            os.makedirs(folder, exist_ok=True)
            for i in range(args.runs):
                if args.reuse and os.path.exists(os.path.join(folder, f"run{i + 1}", "run.json")):
                    continue
                rc = profile(script, os.path.join(folder, f"run{i + 1}"), args.device, args.seconds, args.python)
                if rc != 0:
                    failed = True
                    print(f"{name} {side} run {i + 1}: exit {rc}", file=sys.stderr)
            sides[side] = folder
        c = compare(sides["before"], sides["after"], args.python)
        failed |= c is None
        if c is not None:
            with open(os.path.join(args.out, name, "compare.json"), "w", encoding="utf-8") as f:
                json.dump(c, f, indent=1)
        lines.append(row(name, fix, c))
        print(lines[-1], file=sys.stderr)  # progress: a row as soon as its pair is done
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
