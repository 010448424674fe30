"""How many step rows does the recorder lose when a process leaves without cleanup?

Runs a Python target under diag's bootstrap (no `diag profile`: only the
recorder) that makes N steps of about `--period` seconds each through the
recorder's step lifecycle, then leaves one way: a normal exit, `os._exit`, a
forked child that leaves with `os._exit` (its rows are counted), a segfault
(`ctypes.string_at(0)`). Prints steps made, steps recorded (sum of `weight`)
and the share lost, the median over `--repeat` runs.

    python benchmarks/loss.py [--steps 3000] [--period 0.001] [--repeat 3] [--tree DIR]

`--tree` points at another checkout (its bootstrap and recorder are used), to
compare before and after. docs/run-format.md ("What can be lost") has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

STEPS = """
import os, sys, time
rec = sys.modules["_diag_rec.collect.recorder"].active_recorder()

def steps(n, period):
    for _ in range(n):
        row = rec.begin_step("fake")
        t = time.perf_counter() + period
        while time.perf_counter() < t:  # busy, like a forward pass
            pass
        rec.end_step(row)
"""

LEAVE = {
    "normal exit": "steps(N, P)\n",
    "os._exit": "steps(N, P)\nos._exit(0)\n",
    "forked child, os._exit": """
steps(10, P)
pid = os.fork()
if pid == 0:
    steps(N, P)
    os._exit(0)
os.waitpid(pid, 0)
print(pid)
""",
    "SIGSEGV": "steps(N, P)\nimport ctypes\nctypes.string_at(0)\n",
}


def recorded(run_dir: Path, pid: int | None) -> int:
    """Steps recorded (sum of weight) by `pid`, or by every process."""
    total = 0
    for path in (run_dir / "raw").glob("steps.*.jsonl"):
        if pid is not None and path.name != f"steps.{pid}.jsonl":
            continue
        for line in path.read_bytes().splitlines():
            try:
                total += int(json.loads(line).get("weight", 1))
            except ValueError:
                continue
    return total


def once(tree: Path, name: str, n: int, period: float) -> float:
    """The share of the target's steps lost in one run."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        script = Path(tmp) / "target.py"
        script.write_text(STEPS + f"N, P = {n}, {period}\n" + textwrap.dedent(LEAVE[name]))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DIAG_")}
        env.update(PYTHONPATH=str(tree / "diag" / "collect" / "bootstrap"), DIAG_PKG_PARENT=str(tree),
                   DIAG_RUN_DIR=str(run_dir), DIAG_OPTIONS="{}")
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
        child = int(proc.stdout.split()[-1]) if name.startswith("forked") else None
        return 1.0 - recorded(run_dir, child) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--period", type=float, default=0.001)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    args = ap.parse_args()
    print(f"{args.steps} steps of {args.period * 1e3:g} ms, median of {args.repeat}, tree {args.tree}")
    for name in LEAVE:
        lost = statistics.median(once(args.tree, name, args.steps, args.period) for _ in range(args.repeat))
        print(f"  {name:<24} lost {lost:6.1%}")


if __name__ == "__main__":
    main()
