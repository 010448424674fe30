"""diag vs HolisticTraceAnalysis on the imported-trace corpus (issue 13): do the figures agree?

For each trace under tests/data/traces (a file, or a folder of rank traces), run
HTA's `get_temporal_breakdown()` and `get_gpu_kernel_breakdown()` and
`diag analyze TRACE --json`, map the figures onto each other and print a table
per trace: HTA, diag, difference in points, `!!` where they differ by more than
--tolerance points. A benchmark, not a CI test: HTA is not a dependency of diag.

Run it with HTA's Python (diag runs as a subprocess with the repository's venv):

    python3 -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install HolisticTraceAnalysis
    /tmp/htavenv/bin/python benchmarks/hta_compare.py [--markdown] [TRACE ...]

What is compared (percentages; "span" is each tool's GPU timeline, see below):

- busy: HTA 100 - idle_time_pctg (union of every GPU event, memcpy/memset included,
  from the first to the last one); diag steady.gpu_busy_kernels (union of kernels,
  copies excluded, over the kernel windows: the GPU-active span or the profiled steps).
- active: the same HTA figure; diag gpu_busy_kernels + memcpy_exposed_share (copies
  running with no kernel), which is what HTA's "not idle" means.
- compute: HTA compute_time_pctg (union of COMPUTATION kernels / span); diag
  gpu_busy_kernels - comm_exposed_share (kernels = compute + communication, so the
  union of compute kernels is the union of kernels less communication running alone).
- comm/kern: communication share of summed kernel time, copies excluded: HTA
  COMMUNICATION / (COMPUTATION + COMMUNICATION) from the per-kernel table; diag
  steady.comm_kernel_share.
- memcpy: share of the span with a copy or memset running: union of HTA's MEMORY
  events (its classifier and interval merge) / span; diag memcpy_window_share
  (memcpy only: diag has no memset share).

HTA ceils every event's start and floors its end to whole microseconds when the trace
has fractional times (ns resolution): up to 2 us less per event, about 10 points of busy
on a trace of 10 us kernels. --hta-exact-ns turns that off (HTA_DISABLE_NS_ROUNDING=1).

HTA runs with include_last_profiler_step=True (its default drops the last step, and
the trimmed traces keep only two or three); --hta-default-steps uses HTA's default.

Results, and which tool is right where they differ: docs/accuracy.md, "Imported traces vs HTA".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
FIELDS = ("busy", "active", "compute", "comm/kern", "memcpy")

# The child: one HTA TraceAnalysis over one folder of rank traces; prints its figures as JSON.
CHILD = """
import gzip, json, logging, os, sys, time
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
# HTA finds a file's rank with the regex '"rank":\\s+N', which compact JSON (trim.py's output)
# does not match: every file would be rank 0. Name the ranks from distributedInfo instead.
files = {}
for i, name in enumerate(sorted(os.listdir(sys.argv[1]))):
    path = os.path.join(sys.argv[1], name)
    with (gzip.open(path, "rt") if name.endswith(".gz") else open(path)) as f:
        rank = (json.load(f).get("distributedInfo") or {}).get("rank", i)
    files[int(rank)] = path
a = TraceAnalysis(trace_files=files, include_last_profiler_step=sys.argv[2] == "1")
tb = a.get_temporal_breakdown(visualize=False)
kt, ak = a.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
from hta.utils.utils import get_kernel_type, merge_kernel_intervals
sym = a.t.symbol_table.get_sym_table()
out = {}
for _, r in tb.iterrows():
    rank = int(r["rank"])
    sums = ak[ak["rank"] == rank].groupby("kernel_type")["sum (us)"].sum().to_dict()
    # union of MEMORY events per rank, with HTA's own classifier and interval merge
    g = a.t.traces[rank]
    g = g[g["stream"].ne(-1)]
    g = g[g["name"].map(lambda n: get_kernel_type(sym[n]) == "MEMORY")].copy()
    m = merge_kernel_intervals(g) if len(g) else None
    mem = float(m["end"].sum() - m["ts"].sum()) if m is not None else 0.0
    span = float(r["kernel_time(us)"])
    out[rank] = {"idle": float(r["idle_time(us)"]) / span, "compute": float(r["compute_time(us)"]) / span,
                 "non_compute": float(r["non_compute_time(us)"]) / span, "span_us": span,
                 "memory_union_us": mem, "sums_us": {k: float(v) for k, v in sums.items()}}
top = ak.sort_values("sum (us)", ascending=False).iloc[0]["name"] if len(ak) else None
print(json.dumps({"ranks": out, "top": top, "s": time.perf_counter() - t0}))
"""


def traces(args: list[str]) -> list[Path]:
    """The traces named, or every trace (file or rank folder) in the corpus."""
    if args:
        return [Path(a) for a in args]
    out = []
    for p in sorted(TRACES.iterdir()):
        if p.is_dir() or p.name.endswith((".json", ".json.gz")):
            out.append(p)
    return out


def run_hta(trace: Path, last_step: bool, exact_ns: bool, timeout: float) -> dict:
    """HTA's figures for one trace (copied into a folder of its own, as HTA wants)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted(trace.iterdir()) if trace.is_dir() else [trace]
        for f in files:
            shutil.copy(f, Path(tmp) / f.name)
        env = dict(os.environ)
        if exact_ns:
            env["HTA_DISABLE_NS_ROUNDING"] = "1"
        try:
            p = subprocess.run([sys.executable, "-c", CHILD, tmp, "1" if last_step else "0"],
                               capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"HTA took over {timeout:.0f} s"}
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return {"error": "HTA failed: " + (lines[-1][:160] if lines else f"exit {p.returncode}")}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_diag(path: Path, python: str, timeout: float) -> dict:
    """diag's metrics for one trace file (`diag analyze --json`) and its wall time."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run([python, "-m", "diag", "analyze", str(path), "--json"], cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"diag took over {timeout:.0f} s"}
    s = time.perf_counter() - t0
    try:
        d = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"error": f"diag exit {p.returncode}: {p.stderr.strip()[-160:]}"}
    return {"metrics": d.get("metrics", {}), "primary": d.get("primary"), "s": s}


def hta_figures(r: dict) -> dict[str, float | None]:
    """HTA's per-rank figures mapped onto FIELDS (percent)."""
    sums = r["sums_us"]
    comp, comm = sums.get("COMPUTATION", 0.0), sums.get("COMMUNICATION", 0.0)
    span = r["span_us"]
    busy = 100 * (1 - r["idle"])
    return {"busy": busy, "active": busy, "compute": 100 * r["compute"],
            "comm/kern": 100 * comm / (comp + comm) if comp + comm > 0 else None,
            "memcpy": 100 * r["memory_union_us"] / span if span > 0 else None}


def diag_figures(m: dict) -> dict[str, float | None]:
    """diag's metrics mapped onto FIELDS (percent)."""
    busy = m.get("steady.gpu_busy_kernels")
    exposed = m.get("steady.comm_exposed_share") or 0.0
    comm = m.get("steady.comm_kernel_share")
    if comm is None and m.get("steady.kernel_mean_us") is not None:
        comm = 0.0  # kernels but no communication: diag leaves the share out
    copy = m.get("steady.memcpy_window_share")
    alone = m.get("steady.memcpy_exposed_share") or 0.0

    def pct(v: float | None) -> float | None:
        return None if v is None else 100 * v

    return {"busy": pct(busy), "active": pct(None if busy is None else busy + alone), "compute": pct(None if busy is None else busy - exposed),
            "comm/kern": pct(comm), "memcpy": pct(copy)}


def rank_files(trace: Path) -> list[Path]:
    return sorted(trace.iterdir()) if trace.is_dir() else [trace]


def compare(trace: Path, args: argparse.Namespace) -> list[dict]:
    """One row per rank: the trace, HTA's and diag's figures, timings, or why it was skipped."""
    t0 = time.perf_counter()
    hta = run_hta(trace, not args.hta_default_steps, args.hta_exact_ns, args.timeout)
    hta_s = time.perf_counter() - t0
    name = trace.name
    files = rank_files(trace)
    diags = [run_diag(f, args.diag_python, args.timeout) for f in files]
    rows = []
    for i, (f, d) in enumerate(zip(files, diags, strict=True)):
        label = name if len(files) == 1 else f"{name}/{f.name}"
        row: dict = {"trace": label, "diag_s": d.get("s"), "hta_s": hta_s, "primary": d.get("primary")}
        if "error" in hta or not hta.get("ranks"):
            row["skip"] = hta.get("error") or "HTA found no GPU events"
        elif "error" in d:
            row["skip"] = d["error"]
        else:
            ranks = {int(k): v for k, v in hta["ranks"].items()}
            rank = d["metrics"].get("run.rank")
            r = ranks.get(int(rank)) if rank is not None else None
            if r is None:
                r = ranks[sorted(ranks)[min(i, len(ranks) - 1)]]
            row["hta"] = hta_figures(r)
            row["diag"] = diag_figures(d["metrics"])
            if row["diag"]["busy"] is None:
                row["skip"] = "diag found no kernels"
        rows.append(row)
    return rows


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def diff(row: dict, f: str) -> float | None:
    h, d = row["hta"][f], row["diag"][f]
    return None if h is None or d is None else d - h


def print_text(rows: list[dict], tol: float) -> None:
    for row in rows:
        print(f"\n{row['trace']}  (HTA {row['hta_s']:.1f} s, diag {fmt(row['diag_s'])} s)")
        if "skip" in row:
            print(f"  skipped: {row['skip']}")
            continue
        print(f"  {'':10} {'HTA':>7} {'diag':>7} {'diff':>7}")
        for f in FIELDS:
            dv = diff(row, f)
            flag = " !!" if dv is not None and abs(dv) > tol else ""
            print(f"  {f:10} {fmt(row['hta'][f]):>7} {fmt(row['diag'][f]):>7} {fmt(dv):>7}{flag}")


def print_markdown(rows: list[dict], tol: float) -> None:
    head = " | ".join(f"{f} HTA / diag (diff)" for f in FIELDS)
    print(f"| trace | {head} | HTA s | diag s |")
    print("|---|" + "---|" * (len(FIELDS) + 2))
    for row in rows:
        if "skip" in row:
            print(f"| {row['trace']} | skipped: {row['skip']} |" + " |" * (len(FIELDS) + 1))
            continue
        cells = []
        for f in FIELDS:
            dv = diff(row, f)
            mark = "**" if dv is not None and abs(dv) > tol else ""
            cells.append(f"{fmt(row['hta'][f])} / {fmt(row['diag'][f])} ({mark}{fmt(dv)}{mark})")
        print(f"| {row['trace']} | " + " | ".join(cells)
              + f" | {row['hta_s']:.1f} | {fmt(row['diag_s'])} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="trace files or rank folders (default: the corpus)")
    ap.add_argument("--diag-python", default=str(ROOT / ".venv" / "bin" / "python"))
    ap.add_argument("--tolerance", type=float, default=5.0, help="points (default 5)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per tool per trace")
    ap.add_argument("--hta-default-steps", action="store_true",
                    help="HTA's default: drop the last profiler step")
    ap.add_argument("--hta-exact-ns", action="store_true",
                    help="HTA_DISABLE_NS_ROUNDING=1: keep fractional-microsecond times (HTA ceils "
                         "each event's start and floors its end by default)")
    ap.add_argument("--markdown", action="store_true", help="one markdown table (docs/accuracy.md)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args(argv)
    if not os.path.exists(args.diag_python):
        print(f"no Python at {args.diag_python} (--diag-python)", file=sys.stderr)
        return 2
    rows = []
    for t in traces(args.traces):
        print(f"... {t.name}", file=sys.stderr, flush=True)
        rows.extend(compare(t, args))
    (print_markdown if args.markdown else print_text)(rows, args.tolerance)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
