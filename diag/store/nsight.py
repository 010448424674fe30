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
from typing import TYPE_CHECKING, Any

from diag.errors import DiagError
from diag.store.importers import span, trace_run
from diag.store.kineto import kernel_category, nest_depths

if TYPE_CHECKING:
    from diag.store.run import Run

# CUPTI_ActivityMemcpyKind and CUPTI_ActivityMemoryKind, as nsys stores them.
COPY_KINDS = {0: None, 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}
MEM_KINDS = {0: None, 1: "pageable", 2: "pinned", 3: "device", 4: "array", 5: "managed",
             6: "device_static", 7: "managed_static"}
NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 75
def read_nsight(path: str) -> Run:
    """The Run of an Nsight Systems SQLite export; DiagError if it is none (or still a .nsys-rep)."""
    if path.endswith((".nsys-rep", ".qdrep")):
        raise DiagError(f"{path}: export it first: nsys export --type sqlite {path}")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise DiagError(f"{path}: cannot open SQLite ({exc})") from None
    try:
        have = _tables_in(db)
        if not have & {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS"}:
            raise DiagError(f"{path}: not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS table)")
        off = _epoch_offset(db, have)
        tables = {"kernels": _kernels(db, have, off), "ranges": _ranges(db, have, off)}
    except sqlite3.Error as exc:
        raise DiagError(f"{path}: unreadable Nsight Systems export ({str(exc)[:120]})") from None
    except (ValueError, TypeError) as exc:
        raise DiagError(f"{path}: unexpected Nsight Systems schema ({str(exc)[:120]})") from None
    finally:
        db.close()
    start, end = span(tables)
    if tables["kernels"]:
        tables["windows"] = [{"window": 0, "ts_ns": start, "dur_ns": end - start, "steps": 0,
                              "profiler_start_ns": 0, "trace": os.path.basename(path), "pid": -1}]
    return trace_run(path, "nsys-sqlite", "nsys", tables,
                     collectors={"hooks": {"status": "off", "reason": "imported trace (NVTX ranges only)"}})


def _tables_in(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


def _epoch_offset(db: sqlite3.Connection, have: set[str]) -> int:
    if "TARGET_INFO_SESSION_START_TIME" in have:
        row = db.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        if row and row[0]:
            return int(row[0])
    return 0  # times stay ns from the session start


def _pid_tid(global_tid: Any) -> tuple[int, int]:
    # nsys packs globalTid as (pid << 24) | tid, in the low 48 bits.
    if global_tid is None:
        return -1, -1
    g = int(global_tid)
    return (g >> 24) & 0xFFFFFF, g & 0xFFFFFF


def _kernels(db: sqlite3.Connection, have: set[str], off: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
        cols = _columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
        name_col = next((c for c in ("demangledName", "shortName", "mangledName") if c in cols), None)
        if name_col is None:
            raise ValueError("kernel table has no name column")
        pid_expr = "k.globalPid" if "globalPid" in cols else "NULL"
        q = (f"SELECT k.start, k.end, k.deviceId, k.streamId, s.value, k.gridX, k.gridY, k.gridZ, "
             f"k.blockX, k.blockY, k.blockZ, {pid_expr} FROM CUPTI_ACTIVITY_KIND_KERNEL k "
             f"LEFT JOIN StringIds s ON s.id = k.{name_col}")
        for start, end, dev, stream, name, gx, gy, gz, bx, by, bz, gpid in db.execute(q):
            name = name or ""
            rows.append({"ts_ns": off + start, "dur_ns": end - start, "window": 0, "device": dev,
                         "stream": stream, "name": name, "category": kernel_category(name), "kind": "kernel",
                         "copy_kind": None, "src_mem": None, "dst_mem": None, "bytes": None,
                         "grid": f"[{gx},{gy},{gz}]", "block": f"[{bx},{by},{bz}]",
                         "pid": _pid_tid(gpid)[0]})
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in have:
        cols = _columns(db, "CUPTI_ACTIVITY_KIND_MEMCPY")
        pid_expr = "globalPid" if "globalPid" in cols else "NULL"
        q = (f"SELECT start, end, deviceId, streamId, bytes, copyKind, srcKind, dstKind, {pid_expr} "
             f"FROM CUPTI_ACTIVITY_KIND_MEMCPY")
        for start, end, dev, stream, nbytes, kind, src, dst, gpid in db.execute(q):
            ck = COPY_KINDS.get(kind)
            label = f"Memcpy {ck or 'unknown'} ({MEM_KINDS.get(src) or '?'} -> {MEM_KINDS.get(dst) or '?'})"
            rows.append({"ts_ns": off + start, "dur_ns": end - start, "window": 0, "device": dev,
                         "stream": stream, "name": label, "category": "memcpy", "kind": "memcpy",
                         "copy_kind": ck, "src_mem": MEM_KINDS.get(src), "dst_mem": MEM_KINDS.get(dst),
                         "bytes": nbytes, "grid": None, "block": None, "pid": _pid_tid(gpid)[0]})
    if "CUPTI_ACTIVITY_KIND_MEMSET" in have:
        for start, end, dev, stream, nbytes in db.execute(
                "SELECT start, end, deviceId, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"):
            rows.append({"ts_ns": off + start, "dur_ns": end - start, "window": 0, "device": dev,
                         "stream": stream, "name": "Memset", "category": "memset", "kind": "memset",
                         "copy_kind": None, "src_mem": None, "dst_mem": None, "bytes": nbytes,
                         "grid": None, "block": None, "pid": -1})
    return rows


def _ranges(db: sqlite3.Connection, have: set[str], off: int) -> list[dict[str, Any]]:
    if "NVTX_EVENTS" not in have:
        return []
    cols = _columns(db, "NVTX_EVENTS")
    text_id = "textId" in cols and "StringIds" in have
    has_domain = "domainId" in cols
    domains: dict[Any, str] = {}
    if has_domain:
        for dom, text in db.execute(f"SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = {NVTX_DOMAIN_CREATE}"):
            domains[dom] = text or ""
    name_expr = "COALESCE(e.text, s.value)" if text_id else "e.text"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if text_id else ""
    q = (f"SELECT e.start, e.end, e.globalTid, {name_expr}, {'e.domainId' if has_domain else 'NULL'} "
         f"FROM NVTX_EVENTS e {join} "
         f"WHERE e.eventType IN ({NVTX_PUSHPOP}, {NVTX_STARTEND}) AND e.end IS NOT NULL")
    rows = []
    for start, end, gtid, name, dom in db.execute(q):
        pid, tid = _pid_tid(gtid)
        name = name or ""
        rows.append({"ts_ns": off + start, "dur_ns": end - start, "pid": pid, "tid": tid, "name": name,
                     "kind": "request" if name == "request" else "stage", "source": "nvtx",
                     "domain": domains.get(dom, ""), "depth": 0})
    return nest_depths(rows)
