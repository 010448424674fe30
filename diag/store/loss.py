"""What a recorded run lost, found when it is sealed (docs/run-format.md, "What can be lost").

Every recording process leaves `raw/end.<pid>.json` when it exits through
diag's exit path (atexit, SIGTERM, a multiprocessing child's finalizers): the
steps it made (`seq_start`, `seq_next`) and, per table, the rows written and
dropped with the first error. Loss is read from three signs:

- rows dropped (a full disk, a file-size limit, a file that could not be opened);
- steps missing from a process's `seq` sequence that sampling does not explain
  (kept steps of weight k stand for the k-1 steps after them);
- a process that recorded rows but left no end record (os._exit, a crash, a
  kill): its rows after its last flush are gone, how many is unknown.

`find_loss` returns None for a run that lost nothing; `mark_loss` marks the
manifest: `partial` true, `loss` with the figures, the hooks collector
`degraded` with a one-line reason. Nothing here imports pandas at module level.
"""

from __future__ import annotations

import os
from typing import Any

from diag.errors import DiagError
from diag.store.jsonl import RAW_DIR
from diag.store.safe import int64, load_json

# The recorder's tables (collect/recorder.py): a pid with one of these files ran diag's recorder.
RECORDER_FILES = ("meta.", "steps.", "end.")
MAX_END_BYTES = 1 << 20

# errno names (the end record's errors start with one) in words.
CAUSES = {
    "EFBIG": "file size limit", "ENOSPC": "disk full", "EDQUOT": "disk quota exceeded",
    "EPERM": "permission denied", "EACCES": "permission denied", "EROFS": "read-only file system",
    "ELOOP": "a link planted at a raw file's name", "EIO": "I/O error",
    "EMFILE": "too many open files", "ENFILE": "too many open files",
}


def recorder_pids(run_dir: str) -> list[int]:
    """Processes that ran diag's recorder: those with a meta, steps or end file in raw/."""
    raw = os.path.join(run_dir, RAW_DIR)
    try:
        names = os.listdir(raw)
    except OSError:
        return []
    pids = set()
    for name in names:
        if name.startswith(RECORDER_FILES) and name.count(".") == 2:
            pid = name.split(".")[1]
            if pid.isdigit():
                pids.add(int(pid))
    return sorted(pids)


def read_end(run_dir: str, pid: int) -> dict[str, Any] | None:
    """The end record of `pid`, or None when it is missing or unreadable (a regular file, small, JSON)."""
    path = os.path.join(run_dir, RAW_DIR, f"end.{pid}.json")
    if not os.path.lexists(path):
        return None
    try:
        end = load_json(path, limit=MAX_END_BYTES, follow=False)
    except DiagError:
        return None
    return end if isinstance(end, dict) else None


def _count(value: Any) -> int:
    n = int64(value)
    return n if n is not None and n > 0 else 0


def _process_loss(seq: Any, weight: Any, ts: Any, end: dict[str, Any] | None) -> tuple[int, int, int | None]:
    """(steps lost, steps seen, ts of the last step before the first loss or None) for one process."""
    import numpy as np

    order = np.argsort(seq, kind="stable")
    seq, weight, ts = seq[order], weight[order], ts[order]
    lost, until = 0, None
    if len(seq) > 1:
        # a gap is explained by sampling up to the weight of the rows around it
        gap = np.diff(seq) - np.maximum(weight[:-1], weight[1:])
        missing = np.clip(gap, 0, None)
        lost += int(missing.sum())
        first = np.flatnonzero(missing > 0)
        if len(first):
            until = int(ts[first[0]])
    if end is None:
        seen = int(seq[-1] + weight[-1] - seq[0]) if len(seq) else 0
        return lost, seen, until
    start, seq_next = _count(end.get("seq_start")), _count(end.get("seq_next"))
    if not len(seq):
        return seq_next - start, seq_next - start, None
    head = max(0, int(seq[0]) - start)
    tail = max(0, seq_next - int(seq[-1] + weight[-1]))
    if tail and until is None:
        until = int(ts[-1])
    return lost + head + tail, max(seq_next - start, int(seq[-1] + weight[-1]) - start), until


def find_loss(run_dir: str, steps: Any) -> dict[str, Any] | None:
    """What the run lost (module doc), from raw/end.*.json and the steps table; None if nothing."""
    import numpy as np
    import pandas as pd

    pids = recorder_pids(run_dir)
    if not pids:
        return None
    cols = {c: pd.to_numeric(steps[c], errors="coerce") if c in steps else pd.Series(dtype=float)
            for c in ("pid", "seq", "weight", "ts_ns")}
    ok = cols["pid"].notna() & cols["seq"].notna()
    pid_of = cols["pid"][ok].to_numpy(dtype=np.int64)
    seq_all = cols["seq"][ok].to_numpy(dtype=np.int64)
    weight_all = np.clip(cols["weight"][ok].fillna(1).to_numpy(dtype=np.int64), 1, None)
    ts_all = cols["ts_ns"][ok].fillna(0).to_numpy(dtype=np.int64)
    steps_lost = steps_seen = rows_dropped = 0
    causes: list[str] = []
    no_end: list[int] = []
    until: list[int] = []
    for pid in pids:
        end = read_end(run_dir, pid)
        mine = pid_of == pid
        lost, seen, first_loss = _process_loss(seq_all[mine], weight_all[mine], ts_all[mine], end)
        steps_lost += lost
        steps_seen += seen
        if first_loss is not None:
            until.append(first_loss)
        if end is None:
            no_end.append(pid)
            if mine.any():
                until.append(int(ts_all[mine].max()))
            continue
        rows = end.get("rows") if isinstance(end.get("rows"), dict) else {}
        rows_dropped += sum(_count(r.get("dropped")) for t, r in rows.items() if t != "steps" and isinstance(r, dict))
        errors = end.get("errors") if isinstance(end.get("errors"), dict) else {}
        for error in errors.values():
            name = str(error).split(":", 1)[0]
            cause = CAUSES.get(name, str(error)[:80])
            if cause not in causes:
                causes.append(cause)
    if not (steps_lost or rows_dropped or no_end):
        return None
    return {"steps_seen": steps_seen, "steps_lost": steps_lost, "rows_dropped": rows_dropped,
            "causes": causes, "no_end": no_end, "recorded_until_ns": min(until) if until else None,
            "reason": _reason(steps_lost, steps_seen, rows_dropped, causes, no_end)}


def _n(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def _reason(lost: int, seen: int, dropped: int, causes: list[str], no_end: list[int]) -> str:
    why = f" ({', '.join(causes)})" if causes else ""
    parts = []
    if lost:
        parts.append(f"{_n(lost)} of {_n(seen)} steps lost{why}")
    if dropped:
        parts.append(f"{_n(dropped)} other rows dropped{'' if lost else why}")
    if not (lost or dropped) and causes:
        parts.append(f"write errors{why}")
    if no_end:
        pids = ", ".join(str(p) for p in no_end[:5]) + (", ..." if len(no_end) > 5 else "")
        parts.append(f"1 process (pid {pids}) left without its end record" if len(no_end) == 1 else
                     f"{len(no_end)} processes (pids {pids}) left without their end records")
        parts[-1] += " (os._exit, a crash or a kill): rows after the last flush are lost"
    return "; ".join(parts)


def mark_loss(manifest: dict[str, Any], loss: dict[str, Any] | None) -> None:
    """Mark a lossy run in its manifest: `partial`, `loss`, and the hooks collector `degraded`."""
    if not loss:
        return
    manifest["partial"] = True
    manifest["loss"] = loss
    collectors = manifest.get("collectors")
    if not isinstance(collectors, dict):
        collectors = manifest["collectors"] = {}
    hooks = collectors.get("hooks")
    if not isinstance(hooks, dict):
        hooks = collectors["hooks"] = {}
    if hooks.get("status", "ok") == "ok":
        hooks["status"] = "degraded"
    hooks["reason"] = loss["reason"]
