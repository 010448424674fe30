"""Crash-safe JSON-lines writer used by every recorder.

Lives on the recording side: standard library only (no pandas, no pyarrow).
Rows are buffered and appended in batches; each batch is one write() of whole
lines, so a reader sees at worst a truncated last line after a SIGKILL.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing costs ~2 ms of the target's start-up
    from typing import Any

RAW_DIR = "raw"


class JsonlWriter:
    """Appends rows (dicts) to RUN/raw/<table>.<pid>.jsonl in batches."""

    def __init__(self, run_dir: str, table: str, flush_rows: int = 256, flush_s: float = 0.5) -> None:
        raw = os.path.join(run_dir, RAW_DIR)
        os.makedirs(raw, exist_ok=True)
        self.path = os.path.join(raw, f"{table}.{os.getpid()}.jsonl")
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._buf: list[str] = []
        self._lock = threading.Lock()
        self._flush_rows = flush_rows
        self._flush_s = flush_s
        self._last_flush = time.monotonic()

    def write(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, separators=(",", ":"), default=str)
        with self._lock:
            self._buf.append(line)
            due = len(self._buf) >= self._flush_rows or time.monotonic() - self._last_flush >= self._flush_s
        if due:
            self.flush()

    def write_lines(self, lines: list[str]) -> None:
        """Append ready-made JSON lines (the recorder formats hot rows itself)."""
        with self._lock:
            self._buf.extend(lines)
        self.flush()

    def flush(self) -> None:
        with self._lock:
            if not self._buf or self._fd < 0:
                return
            data = ("\n".join(self._buf) + "\n").encode()
            self._buf.clear()
            self._last_flush = time.monotonic()
            try:
                os.write(self._fd, data)
            except OSError:
                pass  # never hurt the target: a full disk loses rows, not the run

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_jsonl(path: str, skipped: dict[str, int] | None = None, table: str = "") -> list[dict[str, Any]]:
    """Read rows (JSON objects), skipping a line cut short by a kill and any line that is no
    object of finite numbers; `skipped[table]` counts them. The file must be a regular file
    (no FIFO, no symlink): DiagError otherwise, and past DIAG_MAX_TRACE_BYTES."""
    from .safe import iter_lines, loads  # relative: in a target this module runs as _diag_rec.store.jsonl

    rows: list[dict[str, Any]] = []
    bad = 0
    for line in iter_lines(path, follow=False):
        try:
            row = loads(line)
        except ValueError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif line.strip():
            bad += 1
    if skipped is not None and bad:
        skipped[table] = skipped.get(table, 0) + bad
    return rows


def read_raw(run_dir: str, table: str, skipped: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every row of `table` in RUN/raw/<table>.<pid>.jsonl, all writers, files in name order."""
    raw = os.path.join(run_dir, RAW_DIR)
    names = sorted(n for n in os.listdir(raw) if n.startswith(f"{table}.") and n.endswith(".jsonl")) \
        if os.path.isdir(raw) else []
    rows: list[dict[str, Any]] = []
    for name in names:
        rows.extend(read_jsonl(os.path.join(raw, name), skipped, table))
    return rows
