"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> a diag Run.

Kernels (CUPTI_ACTIVITY_KIND_KERNEL, names through StringIds), copies and
memsets (CUPTI_ACTIVITY_KIND_MEMCPY/_MEMSET), ranges (NVTX_EVENTS push/pop and
start/end ranges; `request` ranges become requests). nsys times are ns from
the session start; TARGET_INFO_SESSION_START_TIME.utcEpochNs, where the export
has it, puts them on the Unix epoch. Registered in diag/store/importers.py.
"""

from __future__ import annotations

import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from diag.errors import DiagError
from diag.store.importers import span, trace_run
from diag.store.kineto import kernel_category, nest_depths
from diag.store.safe import env_number, int64, max_trace_bytes, open_regular

if TYPE_CHECKING:
    from diag.store.run import Run

# CUPTI_ActivityMemcpyKind and CUPTI_ActivityMemoryKind, as nsys stores them.
COPY_KINDS = {0: None, 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}
MEM_KINDS = {0: None, 1: "pageable", 2: "pinned", 3: "device", 4: "array", 5: "managed",
             6: "device_static", 7: "managed_static"}
NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 75
# The tables diag reads; each must be a plain table (a view or virtual table could run anything).
KNOWN_TABLES = ("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS", "TARGET_INFO_SESSION_START_TIME")
DEFAULT_TIMEOUT_S = 600.0  # every query together; env DIAG_SQLITE_TIMEOUT_S
DEFAULT_MAX_ROWS = 50_000_000  # kernels, copies and ranges together; env DIAG_MAX_TRACE_ROWS
PROGRESS_EVERY = 1000  # SQLite VM instructions between two deadline checks


class _Reader:
    """One export being read: the connection, a deadline, a row budget, the rows left out."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.timeout_s = env_number("DIAG_SQLITE_TIMEOUT_S", DEFAULT_TIMEOUT_S)
        self.rows_left = int(env_number("DIAG_MAX_TRACE_ROWS", DEFAULT_MAX_ROWS))
        self.deadline = time.monotonic() + self.timeout_s
        self.timed_out = False
        self.skipped = 0
        # a read-only URI, the path escaped: 'report#1.sqlite' must not open (or create) 'report'
        absolute = "/" + os.path.abspath(path).lstrip("/")
        self.db = sqlite3.connect(f"file:{urllib.parse.quote(absolute)}?mode=ro", uri=True)
        self.db.set_progress_handler(self._progress, PROGRESS_EVERY)

    def _progress(self) -> int:
        if time.monotonic() > self.deadline:
            self.timed_out = True
            return 1  # SQLite stops the statement: OperationalError 'interrupted'
        return 0

    def execute(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """Rows of a query, within the deadline and the row budget."""
        if self._progress():
            raise sqlite3.OperationalError("interrupted")
        for row in self.db.execute(sql):
            self.rows_left -= 1
            if self.rows_left < 0:
                raise DiagError(f"{self.path}: more rows than DIAG_MAX_TRACE_ROWS allows "
                                f"({int(env_number('DIAG_MAX_TRACE_ROWS', DEFAULT_MAX_ROWS))}; raise it to read this export)")
            yield row


def read_nsight(path: str) -> Run:
    """The Run of an Nsight Systems SQLite export; DiagError if it is none (or still a .nsys-rep)."""
    if path.endswith((".nsys-rep", ".qdrep")):
        raise DiagError(f"{path}: export it first: nsys export --type sqlite {path}")
    with open_regular(path) as f:  # a regular file (no FIFO, no device), within the size cap
        if os.fstat(f.fileno()).st_size > max_trace_bytes():
            raise DiagError(f"{path}: larger than {max_trace_bytes()} bytes (raise DIAG_MAX_TRACE_BYTES to read it)")
    try:
        r = _Reader(path)
    except sqlite3.Error as exc:
        raise DiagError(f"{path}: cannot open SQLite ({exc})") from None
    try:
        have = _tables_in(r)
        if not have & {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"}:
            raise DiagError(f"{path}: not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table)")
        off = _epoch_offset(r, have)
        tables = {"kernels": _kernels(r, have, off), "ranges": _ranges(r, have, off)}
    except sqlite3.Error as exc:
        if r.timed_out:
            raise DiagError(f"{path}: reading took over {r.timeout_s:g} s (DIAG_SQLITE_TIMEOUT_S)") from None
        raise DiagError(f"{path}: unreadable Nsight Systems export ({str(exc)[:120]})") from None
    except (ValueError, TypeError) as exc:
        raise DiagError(f"{path}: unexpected Nsight Systems schema ({str(exc)[:120]})") from None
    finally:
        r.db.close()
    start, end = span(tables)
    if tables["kernels"]:
        tables["windows"] = [{"window": 0, "ts_ns": start, "dur_ns": end - start, "steps": 0,
                              "profiler_start_ns": 0, "trace": os.path.basename(path), "pid": -1}]
    run = trace_run(path, "nsys-sqlite", "nsys", tables,
                    collectors={"hooks": {"status": "off", "reason": "imported trace (NVTX ranges only)"}})
    run.manifest["imported_from"]["skipped_rows"] = r.skipped
    return run


def _tables_in(r: _Reader) -> set[str]:
    """The plain tables of the export; DiagError if one diag reads is a view or virtual table."""
    have = set()
    for name, kind, sql in r.execute("SELECT name, type, sql FROM sqlite_master WHERE type IN ('table', 'view')"):
        plain = kind == "table" and not str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
        if name in KNOWN_TABLES and not plain:
            raise DiagError(f"{r.path}: {name} is a view or virtual table, not a table (refused)")
        if plain:
            have.add(name)
    return have


def _columns(r: _Reader, table: str) -> set[str]:
    return {row[1] for row in r.execute(f"PRAGMA table_info({table})")}


def _epoch_offset(r: _Reader, have: set[str]) -> int:
    if "TARGET_INFO_SESSION_START_TIME" in have:
        row = next(r.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1"), None)
        if row and row[0]:
            off = int64(row[0])
            if off is None:
                raise ValueError("utcEpochNs beyond int64")
            return off
    return 0  # times stay ns from the session start


def _pid_tid(global_tid: Any) -> tuple[int, int]:
    # nsys packs globalTid as (pid << 24) | tid, in the low 48 bits.
    g = int64(global_tid)
    if g is None:
        return -1, -1
    return (g >> 24) & 0xFFFFFF, g & 0xFFFFFF


def _span(r: _Reader, off: int, start: Any, end: Any) -> tuple[int, int] | None:
    """(ts_ns, dur_ns) of a row, or None (counted) when the times are no int64."""
    s, e = int64(start), int64(end)
    ts = int64(off + s) if s is not None else None
    if ts is None or e is None or int64(e - s) is None or int64(ts + max(0, e - s)) is None:
        r.skipped += 1
        return None
    return ts, e - s


def _text(v: Any) -> str:
    return v if isinstance(v, str) else v.decode("utf-8", "replace") if isinstance(v, bytes) else ""


def _kernels(r: _Reader, have: set[str], off: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        cols = _columns(r, "CUPTI_ACTIVITY_KIND_KERNEL")
        name_col = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), None)
        if name_col is None:
            raise ValueError("kernel table has no name column")
        pid_expr = "k.globalPid" if "globalPid" in cols else "NULL"
        join = "LEFT JOIN StringIds s ON s.id = k." + name_col if "StringIds" in have else ""
        q = (f"SELECT k.start, k.end, k.deviceId, k.streamId, {'s.value' if join else 'NULL'}, k.gridX, k.gridY, "
             f"k.gridZ, k.blockX, k.blockY, k.blockZ, {pid_expr} FROM CUPTI_ACTIVITY_KIND_KERNEL k {join}")
        for start, end, dev, stream, name, gx, gy, gz, bx, by, bz, gpid in r.execute(q):
            t = _span(r, off, start, end)
            if t is None:
                continue
            name = _text(name)
            rows.append({"ts_ns": t[0], "dur_ns": t[1], "window": 0, "device": _int(dev),
                         "stream": _int(stream), "name": name, "category": kernel_category(name), "kind": "kernel",
                         "copy_kind": None, "src_mem": None, "dst_mem": None, "bytes": None,
                         "grid": _dims(gx, gy, gz), "block": _dims(bx, by, bz), "pid": _pid_tid(gpid)[0]})
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        cols = _columns(r, "CUPTI_ACTIVITY_KIND_MEMCPY")
        pid_expr = "globalPid" if "globalPid" in cols else "NULL"
        q = (f"SELECT start, end, deviceId, streamId, bytes, copyKind, srcKind, dstKind, {pid_expr} "
             f"FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        for start, end, dev, stream, nbytes, kind, src, dst, gpid in r.execute(q):
            t = _span(r, off, start, end)
            if t is None:
                continue
            ck = COPY_KINDS.get(kind)
            label = f"Memcpy {ck or 'unknown'} ({MEM_KINDS.get(src) or '?'} -> {MEM_KINDS.get(dst) or '?'})"
            rows.append({"ts_ns": t[0], "dur_ns": t[1], "window": 0, "device": _int(dev),
                         "stream": _int(stream), "name": label, "category": "memcpy", "kind": "memcpy",
                         "copy_kind": ck, "src_mem": MEM_KINDS.get(src), "dst_mem": MEM_KINDS.get(dst),
                         "bytes": int64(nbytes), "grid": None, "block": None, "pid": _pid_tid(gpid)[0]})
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        for start, end, dev, stream, nbytes in r.execute(
                "SELECT start, end, deviceId, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"):
            t = _span(r, off, start, end)
            if t is None:
                continue
            rows.append({"ts_ns": t[0], "dur_ns": t[1], "window": 0, "device": _int(dev),
                         "stream": _int(stream), "name": "Memset", "category": "memset", "kind": "memset",
                         "copy_kind": None, "src_mem": None, "dst_mem": None, "bytes": int64(nbytes),
                         "grid": None, "block": None, "pid": -1})
    return rows


def _int(v: Any) -> int:
    n = int64(v)
    return -1 if n is None else n


def _dims(x: Any, y: Any, z: Any) -> str:
    return "[" + ",".join(str(_int(v)) for v in (x, y, z)) + "]"


def _ranges(r: _Reader, have: set[str], off: int) -> list[dict[str, Any]]:
    if "NVTX_EVENTS" not in have:
        return []
    cols = _columns(r, "NVTX_EVENTS")
    text_id = "textId" in cols and "StringIds" in have
    has_domain = "domainId" in cols
    domains: dict[Any, str] = {}
    if has_domain:
        for dom, text in r.execute(f"SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = {NVTX_DOMAIN_CREATE}"):
            domains[dom] = _text(text)
    name_expr = "COALESCE(e.text, s.value)" if text_id else "e.text"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if text_id else ""
    q = (f"SELECT e.start, e.end, e.globalTid, {name_expr}, {'e.domainId' if has_domain else 'NULL'} "
         f"FROM NVTX_EVENTS e {join} "
         f"WHERE e.eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}) AND e.end IS NOT NULL")
    rows = []
    for start, end, gtid, name, dom in r.execute(q):
        t = _span(r, off, start, end)
        if t is None:
            continue
        pid, tid = _pid_tid(gtid)
        name = _text(name)
        rows.append({"ts_ns": t[0], "dur_ns": t[1], "pid": pid, "tid": tid, "name": name,
                     "kind": "request" if name == "request" else "stage", "source": "nvtx",
                     "domain": domains.get(dom, ""), "depth": 0})
    return nest_depths(rows)
