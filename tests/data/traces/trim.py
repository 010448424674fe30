"""Trim a public Kineto trace for the corpus: whole steps, GPU activity, the launches
of that activity, annotations and the CPU ops diag reads; everything else dropped.

    python tests/data/traces/trim.py IN OUT.json.gz [--steps N] [--keep-cat CAT ...]

Kept: GPU events (kernel, memcpy, memset, gpu_user_annotation), runtime/driver calls
whose correlation id launched a kept GPU event, user annotations, ProfilerStep#,
DataLoader/optimizer/collective CPU ops, process and thread names; args cut to
the fields diag reads. `--steps N` keeps the first N whole ProfilerSteps (and the
GPU work their launches queued). Standard library only; run once per trace,
recorded in SOURCES.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
CPU_KEEP = re.compile(r"ProfilerStep#|DataLoader|dataloader|Optimizer|optimizer|nccl:|c10d|record_param_comms"
                      r"|execute_model|forward|generate", re.I)
ARGS_KEEP = {"device", "stream", "correlation", "grid", "block", "bytes", "External id", "Collective name",
             "In msg nelems", "Out msg nelems", "dtype", "Group size", "Process Group Name", "Process Group Ranks",
             "name", "labels", "sort_index"}


def _load(path: str) -> dict:
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    data = json.loads(raw)
    return {"traceEvents": data} if isinstance(data, list) else data


def trim(trace: dict, steps: int | None, keep_cats: set[str]) -> dict:
    events = [e for e in trace.get("traceEvents") or [] if isinstance(e, dict)]
    window = None
    if steps:
        marks = sorted((e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
                        and str(e.get("cat", "")).lower() != "gpu_user_annotation"), key=lambda e: e["ts"])
        if marks:
            last = marks[min(steps, len(marks)) - 1]
            window = (marks[0]["ts"], last["ts"] + last.get("dur", 0))
    launched: set = set()
    for e in events:
        if str(e.get("cat", "")).lower() in GPU_CATS and isinstance(e.get("args"), dict):
            launched.add(e["args"].get("correlation"))
    keep_corr: set = set()
    out = []
    for e in events:
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        if e.get("ph") == "M":
            out.append(e)
            continue
        if e.get("ph") != "X":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if cat in LAUNCH_CATS:
            if args.get("correlation") not in launched:
                continue
        elif not (cat in GPU_CATS or cat == "user_annotation" or cat in keep_cats
                  or (cat in ("cpu_op", "operator") and CPU_KEEP.search(name))):
            continue
        if window and cat not in GPU_CATS and not (window[0] <= e.get("ts", 0) <= window[1]):
            continue
        if cat in LAUNCH_CATS:
            keep_corr.add(args.get("correlation"))
        out.append(e)
    if window:  # GPU work launched inside the kept steps, wherever it ran
        out = [e for e in out if str(e.get("cat", "")).lower() not in GPU_CATS - {"gpu_user_annotation"}
               or (e.get("args") or {}).get("correlation") in keep_corr
               or window[0] <= e.get("ts", 0) <= window[1]]
    for e in out:
        if isinstance(e.get("args"), dict):
            e["args"] = {k: v for k, v in e["args"].items() if k in ARGS_KEEP}
        for k in ("ts", "dur"):
            if isinstance(e.get(k), float):
                e[k] = round(e[k], 3)
    keep = {k: trace[k] for k in ("schemaVersion", "distributedInfo", "baseTimeNanoseconds", "displayTimeUnit")
            if k in trace}
    props = trace.get("deviceProperties")
    if isinstance(props, list):
        keep["deviceProperties"] = [{k: d.get(k) for k in ("id", "name", "totalGlobalMem", "computeMajor",
                                                            "computeMinor") if k in d} for d in props]
    keep["traceEvents"] = out
    return keep


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--keep-cat", action="append", default=[])
    a = p.parse_args()
    trimmed = trim(_load(a.src), a.steps, {c.lower() for c in a.keep_cat})
    with gzip.open(a.dst, "wt", compresslevel=9) as f:
        json.dump(trimmed, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
