"""Profile corpus programs under diag on this machine and print verdict, runner-up and margin per program.

    python benchmarks/corpus/verdicts.py OUTDIR [--device cpu] [--busy] [--heldout] [names...]

--heldout also runs benchmarks/heldout's programs (`--seconds 12`, as in
docs/accuracy.md) after the corpus. --busy runs two competing busy-loop processes (one per core) for the whole
pass, as on a shared production host. Programs without an expectation for the
device are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from expected import EXPECTED, verdict_ok  # noqa: E402

DIAG = [sys.executable, "-m", "diag"]
HELDOUT = os.path.join(os.path.dirname(HERE), "heldout")
HELDOUT_SECONDS = "12"


def _heldout_expected():  # noqa: ANN202 - a module
    """benchmarks/heldout/expected.py (same module name as ours, so loaded by path)."""
    spec = importlib.util.spec_from_file_location("heldout_expected", os.path.join(HELDOUT, "expected.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    p.add_argument("--heldout", action="store_true", help="also run benchmarks/heldout")
    p.add_argument("names", nargs="*")
    a = p.parse_intermixed_args()  # names before or after the options, as the docs write them
    # (name, program dir, expectations, verdict check, extra program args)
    sets = [(n, HERE, EXPECTED, verdict_ok, []) for n in sorted(EXPECTED)]
    if a.heldout:
        ho = _heldout_expected()
        sets += [(n, HELDOUT, ho.EXPECTED, ho.verdict_ok, ["--seconds", HELDOUT_SECONDS]) for n in sorted(ho.EXPECTED)]
    if a.names:
        sets = [t for t in sets if t[0] in a.names]
    spinners = [mp.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)] if a.busy else []
    for s in spinners:
        s.start()
    try:
        for name, where, expected, ok_for, extra in sets:
            if a.device not in expected[name]:
                continue
            run = os.path.join(a.out, name)
            subprocess.run([*DIAG, "profile", "--out", run, "--", sys.executable, os.path.join(where, f"{name}.py"),
                            "--device", a.device, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False)
            res = subprocess.run([*DIAG, "analyze", run, "--json"], capture_output=True, text=True, check=False)
            try:
                d = json.loads(res.stdout)
            except json.JSONDecodeError:
                print(f"{name}: no diagnosis ({res.stderr.strip()[-200:]})", flush=True)
                continue
            scores = d.get("scores", {})
            runner, margin = (d["runner_up"], d["margin"]) if "margin" in d else margin_of(scores)
            margin = margin or 0.0  # no verdict: no margin
            ok = ok_for(name, a.device, d.get("primary"), scores)
            m = d.get("metrics", {})
            print(f"{name}: expected {expected[name][a.device][0]} got {d.get('primary')} "
                  f"{scores.get(d.get('primary') or '', 0):.2f} runner-up {runner} margin {margin:.2f} "
                  f"{'OK' if ok else 'MISS'} runq={m.get('steady.step_thread_runq_share')}", flush=True)
    finally:
        for s in spinners:
            s.kill()


if __name__ == "__main__":
    main()
