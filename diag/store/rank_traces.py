"""A directory of per-rank traces (`diag analyze DIR`, HTA's input): one trace file per rank, no run.json.

Each file is read by its own importer (diag/store/importers.py) into a Run of its
own: ranks keep their own clocks, devices and pids, so nothing is merged. The
directory's Run (`RankTraces`) carries them in `rank_runs`, ordered by rank
(the trace's `distributedInfo`, else the file order); its own tables are rank
0's, for views that show one timeline. diagnose() judges every rank and the job.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from diag.errors import DiagError
from diag.store.run import Run

# File names a rank trace has: what torch.profiler's tensorboard handler and HTA's tests write.
TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".sqlite")


@dataclass
class RankTraces(Run):
    """Several ranks' traces read as one job: `rank_runs` by rank; the tables are the first rank's."""

    rank_runs: list[Run] = field(default_factory=list)


def trace_files(path: str) -> list[str]:
    """The trace files directly in directory `path`, by name."""
    return sorted(os.path.join(path, n) for n in os.listdir(path)
                  if n.endswith(TRACE_SUFFIXES) and os.path.isfile(os.path.join(path, n)))


def is_rank_dir(path: str) -> bool:
    """A directory without run.json that holds trace files."""
    from diag.store.manifest import MANIFEST

    return os.path.isdir(path) and not os.path.lexists(os.path.join(path, MANIFEST)) and bool(trace_files(path))


def read_rank_dir(path: str) -> Run:
    """The job of the traces in directory `path`: one trace is read as a plain trace; two or more as
    RankTraces. DiagError when two files claim the same rank."""
    from diag.store.importers import import_trace

    files = trace_files(path)
    runs = [import_trace(f) for f in files]
    if len(runs) == 1:
        return runs[0]
    ranks = [_rank(r, i) for i, r in enumerate(runs)]
    if len(set(ranks)) != len(ranks):
        raise DiagError(f"{path}: two trace files claim the same rank (one directory per job)")
    order = sorted(range(len(runs)), key=lambda i: ranks[i])
    runs = [runs[i] for i in order]
    for i, r in zip(order, runs, strict=True):
        r.manifest.setdefault("distributed", {})["rank"] = ranks[i]
    first = runs[0]
    manifest = dict(first.manifest)
    manifest["run_id"] = os.path.basename(os.path.normpath(path))
    manifest["imported_from"] = {"path": os.path.abspath(path), "format": "ranks",
                                 "files": [os.path.basename(files[i]) for i in order]}
    manifest["distributed"] = {**(first.manifest.get("distributed") or {}), "ranks_here": len(runs)}
    manifest["start_ns"] = min(r.start_ns for r in runs)
    manifest["end_ns"] = max(r.end_ns for r in runs)
    manifest["duration_s"] = max(0.0, (manifest["end_ns"] - manifest["start_ns"]) / 1e9)
    return RankTraces(path=path, manifest=manifest, _cache=first._cache, rank_runs=runs)


def _rank(run: Run, default: int) -> int:
    rank = (run.manifest.get("distributed") or {}).get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else default
