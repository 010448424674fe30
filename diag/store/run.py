"""Reading a run directory into DataFrames, and sealing raw rows into Parquet.

`open_run(path)` is the one entry point for analysis and views. Tables come
from `<table>.parquet` when the run was sealed, else from the raw JSON lines
(a run cut short by a kill), and are always returned with their documented
columns, even when empty.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from diag.errors import DiagError
from diag.store.importers import formats_text
from diag.store.jsonl import RAW_DIR, read_raw
from diag.store.loss import find_loss, mark_loss
from diag.store.manifest import MANIFEST, read_manifest, write_manifest
from diag.store.safe import int64, number
from diag.store.steps import TABLE_COLUMNS as STEP_TABLE_COLUMNS

# Columns of every table (docs/run-format.md). Extra columns are kept.
TABLES: dict[str, list[str]] = {
    "steps": list(STEP_TABLE_COLUMNS),
    "copies": ["ts_ns", "dur_ns", "pid", "tid", "api", "direction", "bytes", "pinned",
               "non_blocking", "in_step", "weight"],
    "syncs": ["ts_ns", "dur_ns", "pid", "tid", "api", "in_step", "weight"],
    "ranges": ["ts_ns", "dur_ns", "pid", "tid", "name", "kind", "source", "domain", "depth", "weight"],
    "events": ["ts_ns", "dur_ns", "pid", "tid", "kind", "name", "detail", "weight"],
    "host": ["ts_ns", "pid", "ppid", "name", "cpu_pct", "rss_bytes", "read_bytes", "write_bytes",
             "read_chars", "write_chars", "ctx_vol", "ctx_invol", "num_threads", "iowait_s"],
    "threads": ["ts_ns", "pid", "tid", "user_s", "system_s", "run_delay_s"],
    "system": ["ts_ns", "cpu_pct", "iowait_pct", "mem_used_bytes", "mem_total_bytes"],
    "gpu": ["ts_ns", "gpu", "util_gpu", "util_mem", "mem_used_bytes", "mem_total_bytes",
            "sm_clock_mhz", "mem_clock_mhz", "sm_clock_max_mhz", "power_w", "power_limit_w",
            "temp_c", "throttle", "throttle_reasons", "pcie_tx_bps", "pcie_rx_bps", "sm_active",
            "sm_occupancy", "tensor_active", "dram_bw_util", "fp32_active", "fp16_active"],
    "gpu_procs": ["ts_ns", "gpu", "pid", "used_bytes"],
    "sockets": ["ts_ns", "port", "accept_queue", "unread"],
    "stacks": ["ts_ns", "dur_ns", "pid", "tid", "stack", "idle"],
    "kernels": ["ts_ns", "dur_ns", "window", "device", "stream", "name", "category", "kind",
                "copy_kind", "src_mem", "bytes", "grid", "block"],
    "windows": ["window", "ts_ns", "dur_ns", "steps", "profiler_start_ns", "trace"],
    # diag load (diag/load/): one row per request (ts_ns: when it was due), one per sweep step
    "load_requests": ["ts_ns", "sent_ns", "end_ns", "latency_ms", "status", "error", "bytes", "phase", "step"],
    "load_sweep": ["ts_ns", "step", "level", "offered_per_s", "throughput_per_s", "requests", "errors",
                   "error_rate", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms", "held"],
}

# Kinds of the documented columns, enforced on raw rows (JSON lines anyone could have
# written): a value of another kind becomes null, a row without a valid ts_ns is dropped.
NUMERIC_COLUMNS = frozenset({
    "ts_ns", "dur_ns", "pid", "tid", "ppid", "batch", "gpu_ns", "syncs", "seq", "weight", "bytes",
    "cpu_pct", "rss_bytes", "read_bytes", "write_bytes", "read_chars", "write_chars", "ctx_vol",
    "ctx_invol", "num_threads", "iowait_s", "user_s", "system_s", "run_delay_s", "iowait_pct",
    "mem_used_bytes", "mem_total_bytes", "gpu", "util_gpu", "util_mem", "sm_clock_mhz", "mem_clock_mhz",
    "sm_clock_max_mhz", "power_w", "power_limit_w", "temp_c", "throttle", "pcie_tx_bps", "pcie_rx_bps",
    "sm_active", "sm_occupancy", "tensor_active", "dram_bw_util", "fp32_active", "fp16_active",
    "used_bytes", "port", "accept_queue", "unread", "window", "stream", "steps", "profiler_start_ns", "depth"})
TEXT_COLUMNS = frozenset({
    "source", "model", "shapes", "dtype", "name", "kind", "domain", "api", "direction", "stack",
    "category", "copy_kind", "src_mem", "dst_mem", "grid", "block", "trace", "throttle_reasons"})
BOOL_COLUMNS = frozenset({"in_window", "idle", "pinned", "non_blocking", "in_step"})


def typed_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """(rows with documented columns of their kind, how many rows were dropped for want of a ts_ns)."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if int64(row.get("ts_ns")) is None:
            continue
        for k, v in row.items():
            if v is None or type(v) is float or type(v) is str and k not in NUMERIC_COLUMNS:
                continue  # floats are finite: the JSON reader refuses the rest
            if k in NUMERIC_COLUMNS:
                row[k] = number(v) if type(v) is not bool else int(v)
            elif k in TEXT_COLUMNS:
                row[k] = str(v) if isinstance(v, (int, bool)) and number(v) is not None else None
            elif k in BOOL_COLUMNS:
                row[k] = bool(v) if type(v) is bool or v in (0, 1) else None
            elif type(v) is int and number(v) is None:
                row[k] = None  # beyond int64: no column type holds it
        out.append(row)
    return out, len(rows) - len(out)


# Tables that are not JSON lines in raw/ but parsed from another tool's file.
Rows = list[dict[str, Any]] | pd.DataFrame
_DERIVED: dict[str, Callable[[str], Rows]] = {}


def derived_table(name: str) -> Callable[[Callable[[str], Rows]], Callable[[str], Rows]]:
    """Register a parser that builds table `name` from files in the run directory."""

    def register(fn: Callable[[str], Rows]) -> Callable[[str], Rows]:
        _DERIVED[name] = fn
        return fn

    return register


def _frame(name: str, rows: list[dict[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    for col in TABLES.get(name, []):
        if col not in df.columns:
            if df.empty:
                df[col] = pd.Series(dtype="float64")
            else:  # rows kept in full weigh 1 (the recorder thins long runs: docs/run-format.md)
                df[col] = 1 if col == "weight" else None
    if "ts_ns" in df.columns and not df.empty:
        # most tables are written in time order: sorting them again would copy every column
        in_order = df["ts_ns"].is_monotonic_increasing and df.index.equals(pd.RangeIndex(len(df)))
        if not in_order:
            df = df.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    return df


# Modules that register derived tables; imported on first use (they import this module).
_PARSERS = ("diag.store.kineto", "diag.store.pyspy")


def _load_parsers() -> None:
    import importlib

    for mod in _PARSERS:
        importlib.import_module(mod)


def _raw_rows(run_dir: str, name: str, skipped: dict[str, int]) -> Rows:
    _load_parsers()
    if name in _DERIVED:
        return _DERIVED[name](run_dir)
    rows, dropped = typed_rows(read_raw(run_dir, name, skipped))
    if dropped:
        skipped[name] = skipped.get(name, 0) + dropped
    return rows


@dataclass
class Run:
    """A recorded run: its manifest and its tables, loaded on first use."""

    path: str
    manifest: dict[str, Any]
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    # raw rows left out per table: lines that were no JSON object, rows without a valid ts_ns
    skipped_rows: dict[str, int] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return bool(self.manifest.get("partial", False))

    @property
    def start_ns(self) -> int:
        return int(self.manifest.get("start_ns") or 0)

    @property
    def end_ns(self) -> int:
        end = self.manifest.get("end_ns")
        if end:
            return int(end)
        # A killed run never wrote its end: take the last thing recorded.
        last = self.start_ns
        for name in ("host", "gpu", "steps", "events"):
            df = self.table(name)
            if not df.empty:
                last = max(last, int(df["ts_ns"].max()))
        return last

    @property
    def duration_s(self) -> float:
        return max(0.0, (self.end_ns - self.start_ns) / 1e9)

    def table(self, name: str) -> pd.DataFrame:
        """The table `name` (docs/run-format.md); empty with its columns if none."""
        if name not in self._cache:
            parquet = os.path.join(self.path, f"{name}.parquet")
            if os.path.exists(parquet):
                try:
                    df = pd.read_parquet(parquet)
                except Exception as exc:  # noqa: BLE001 - a corrupt file is the user's problem to see
                    raise DiagError(f"{parquet}: unreadable Parquet table ({exc.__class__.__name__})") from None
            else:
                df = pd.DataFrame(_raw_rows(self.path, name, self.skipped_rows))
            self._cache[name] = _frame(name, df)
        return self._cache[name]

    def seconds(self, ts_ns: Any) -> Any:
        """Seconds since the run started, for a scalar or a Series of ts_ns."""
        return (ts_ns - self.start_ns) / 1e9


def open_run(path: str) -> Run:
    """Open a run directory, or raise DiagError with one line saying what is wrong."""
    if not os.path.exists(path):
        raise DiagError(f"{path}: no such run directory")
    if not os.path.isdir(path):
        raise DiagError(f"{path}: not a run directory (diag analyze also reads traces: {formats_text()})")
    if not os.path.lexists(os.path.join(path, MANIFEST)):
        raise DiagError(f"{path}: not a diag run (no {MANIFEST})")
    return Run(path=path, manifest=read_manifest(path))


# Raw tables read only from raw/ (by the recorder's own readers), on purpose never sealed.
RAW_ONLY = ("meta",)


def stored_tables(path: str) -> list[str]:
    """The tables `seal` writes: the documented ones (TABLES), every table a registered
    parser builds, and every raw table a collector wrote; so no table is left out
    because nobody remembered to list it."""
    _load_parsers()
    raw = os.path.join(path, RAW_DIR)
    on_disk = sorted({n.split(".", 1)[0] for n in os.listdir(raw) if n.endswith(".jsonl")}) \
        if os.path.isdir(raw) else []
    names = dict.fromkeys([*TABLES, *_DERIVED, *on_disk])
    return [n for n in names if n not in RAW_ONLY]


def seal(path: str) -> dict[str, Any] | None:
    """Convert every table of the run into Parquet. Idempotent; raw files are kept.

    Returns what the recording lost (diag.store.loss), None if nothing; a lossy
    run is marked in run.json (`partial`, `loss`, the hooks collector `degraded`).
    """
    run = open_run(path)
    for name in stored_tables(path):
        df = run.table(name)
        out = os.path.join(path, f"{name}.parquet")
        tmp = out + ".tmp"
        _to_parquet(df, tmp)
        os.replace(tmp, out)
    loss = find_loss(path, run.table("steps"))
    if loss:
        manifest = read_manifest(path)
        mark_loss(manifest, loss)
        write_manifest(path, manifest)
    return loss


# zstd: run directories 3-8x smaller than snappy (stacks' repeated frame text above all), read as fast.
PARQUET_COMPRESSION = "zstd"


def _to_parquet(df: pd.DataFrame, out: str) -> None:
    # Mixed object columns (e.g. None and str) must become one Arrow type.
    clean = df.copy()
    for col in clean.columns:
        if clean[col].dtype == object:
            non_null = clean[col].dropna()
            if not non_null.empty and all(isinstance(v, bool) for v in non_null):
                continue
            if not non_null.empty and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in non_null):
                clean[col] = pd.to_numeric(clean[col])
            else:
                clean[col] = clean[col].map(lambda v: None if v is None or v != v else (v if isinstance(v, str) else str(v)) if not isinstance(v, bool) else v)
    clean.to_parquet(out, index=False, compression=PARQUET_COMPRESSION)
