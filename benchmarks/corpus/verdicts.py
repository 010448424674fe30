"""Profile corpus programs under diag on this machine and print verdict, runner-up and margin per program.

    python benchmarks/corpus/verdicts.py OUTDIR [--device cpu] [--busy] [names...]

--busy runs two competing busy-loop processes (one per core) for the whole
pass, as on a shared production host. Programs without an expectation for the
device are skipped.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from expected import EXPECTED, verdict_ok  # noqa: E402

DIAG = [sys.executable, "-m", "diag"]


def _spin() -> None:
    while True:
        pass


def margin_of(scores: dict[str, float]) -> tuple[str | None, float]:
    """Runner-up label and winner minus runner-up, from the scores (works on JSON without `margin`)."""
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    if len(ranked) < 2:
        return None, ranked[0][1] if ranked else 0.0
    return ranked[1][0], ranked[0][1] - ranked[1][1]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--device", default="cpu")
    p.add_argument("--busy", action="store_true")
    p.add_argument("names", nargs="*")
    a = p.parse_args()
    spinners = [mp.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)] if a.busy else []
    for s in spinners:
        s.start()
    try:
        for name in a.names or sorted(EXPECTED):
            if a.device not in EXPECTED[name]:
                continue
            run = os.path.join(a.out, name)
            subprocess.run([*DIAG, "profile", "--out", run, "--", sys.executable, os.path.join(HERE, f"{name}.py"),
                            "--device", a.device], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            res = subprocess.run([*DIAG, "analyze", run, "--json"], capture_output=True, text=True, check=False)
            try:
                d = json.loads(res.stdout)
            except json.JSONDecodeError:
                print(f"{name}: no diagnosis ({res.stderr.strip()[-200:]})", flush=True)
                continue
            scores = d.get("scores", {})
            runner, margin = (d["runner_up"], d["margin"]) if "margin" in d else margin_of(scores)
            ok = verdict_ok(name, a.device, d.get("primary"), scores)
            m = d.get("metrics", {})
            print(f"{name}: expected {EXPECTED[name][a.device][0]} got {d.get('primary')} "
                  f"{scores.get(d.get('primary') or '', 0):.2f} runner-up {runner} margin {margin:.2f} "
                  f"{'OK' if ok else 'MISS'} runq={m.get('steady.step_thread_runq_share')}", flush=True)
    finally:
        for s in spinners:
            s.kill()


if __name__ == "__main__":
    main()
