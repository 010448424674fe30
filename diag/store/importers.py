"""Traces from other tools as a diag Run: `diag analyze trace.json` / `report.sqlite`.

One registry, IMPORTERS: each format has a name (the manifest's
`imported_from.format`), a short title for help texts, a sniffing predicate
over the file's path and first bytes, and a reader that builds the Run. The
first importer whose predicate accepts a file reads it; the last one, Kineto,
takes whatever no other format claims (JSON has no magic bytes), and its
reader says what is wrong with a file that is no trace.

Readers live in their format's module (diag/store/kineto.py,
diag/store/nsight.py) and are imported on first use, so asking the registry
what it reads (CLI help) does not load pandas. They build the Run with
`trace_run`: a synthesized manifest (schema diag.run/1, `imported_from`,
collectors that cannot exist in a trace marked `off` with reason "imported
trace") and every table pre-filled in `_cache`.

Adding a format: a module with a reader `(path) -> Run`, and one row here.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from diag.errors import DiagError
from diag.store.manifest import SCHEMA

if TYPE_CHECKING:
    from diag.store.run import Run

OFF = {"status": "off", "reason": "imported trace"}
SNIFF_BYTES = 16
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class Importer:
    """One trace format diag reads."""

    name: str  # imported_from.format in the manifest
    title: str  # how help texts name it
    sniff: Callable[[str, bytes], bool]  # (path, first SNIFF_BYTES bytes) -> is it this format
    reader: str  # "module:function", (path) -> Run; imported on first use

    def read(self, path: str) -> Run:
        module, _, function = self.reader.partition(":")
        return getattr(importlib.import_module(module), function)(path)


def _nsight(path: str, head: bytes) -> bool:
    # a .nsys-rep is claimed too: its reader says how to export it
    return head.startswith(SQLITE_MAGIC) or path.endswith((".nsys-rep", ".qdrep"))


def _anything(path: str, head: bytes) -> bool:
    return True


IMPORTERS: tuple[Importer, ...] = (
    Importer("nsys-sqlite", "Nsight .sqlite", _nsight, "diag.store.nsight:read_nsight"),
    Importer("kineto", "Kineto .json", _anything, "diag.store.kineto:read_kineto"),  # last: takes the rest
)


def formats_text() -> str:
    """The formats diag imports, for help and error texts: 'Nsight .sqlite / Kineto .json'."""
    return " / ".join(i.title for i in IMPORTERS)


def importer_for(path: str) -> Importer:
    """The importer that reads the file at `path`; DiagError if it is missing or unreadable."""
    if not os.path.isfile(path):
        raise DiagError(f"{path}: no such trace file")
    from diag.store.safe import open_regular

    with open_regular(path) as f:  # DiagError if it is no regular file or cannot be read
        head = f.read(SNIFF_BYTES)
    return next(i for i in IMPORTERS if i.sniff(path, head))


def open_any(path: str) -> Run:
    """A run directory, a trace file from another tool, or a directory of per-rank traces, read as a run.
    DiagError if none."""
    if os.path.isfile(path):
        return import_trace(path)
    from diag.store.rank_traces import is_rank_dir, read_rank_dir

    if is_rank_dir(path):  # one trace per rank, no run.json (HTA's input)
        return read_rank_dir(path)
    from diag.store.run import open_run

    return open_run(path)


def import_trace(path: str) -> Run:
    """Read a trace file of any registered format into a Run; DiagError if unreadable."""
    return importer_for(path).read(path)


# -- for the readers -----------------------------------------------------------------------

def span(tables: dict[str, list[dict[str, Any]]]) -> tuple[int, int]:
    """(first start, last end) in ns over every row of every table; (0, 0) if none."""
    starts = [r["ts_ns"] for rows in tables.values() for r in rows]
    ends = [r["ts_ns"] + max(0, r.get("dur_ns") or 0) for rows in tables.values() for r in rows]
    return (min(starts), max(ends)) if starts else (0, 0)


def trace_run(path: str, fmt: str, tool: str, tables: dict[str, list[dict[str, Any]]],
              gpu: dict[str, Any] | None = None, collectors: dict[str, Any] | None = None) -> Run:
    """The in-memory Run of an imported trace: `tables` rows, a manifest saying where they came from.

    `tool` recorded the kernels; `collectors` replaces entries of the manifest's collectors.
    """
    import pandas as pd

    from diag.store.run import TABLES, Run, _frame

    start, end = span(tables)
    manifest = {
        "schema": SCHEMA, "run_id": os.path.basename(path), "command": [], "cwd": "",
        "start_ns": start, "end_ns": end, "duration_s": max(0.0, (end - start) / 1e9),
        "exit_code": None, "signal": None, "partial": False, "host": {}, "gpu": gpu or {},
        "versions": {}, "env": {},
        "collectors": {"host": OFF, "gpu": OFF, "stacks": OFF, "hooks": OFF,
                       "kernels": {"status": "ok", "source": tool}, **(collectors or {})},
        "options": {},
        "imported_from": {"path": os.path.abspath(path), "format": fmt},
    }
    cache = {name: _frame(name, pd.DataFrame(tables.get(name, []))) for name in TABLES}
    return Run(path=path, manifest=manifest, _cache=cache)
