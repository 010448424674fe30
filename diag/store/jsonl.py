"""Crash-safe JSON-lines writer used by every recorder.

Lives on the recording side: standard library only (no pandas, no pyarrow).
Rows are buffered and appended in batches; each batch is one write() of whole
lines, so a reader sees at worst a truncated last line after a SIGKILL.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing costs ~2 ms of the target's start-up
    from typing import Any

RAW_DIR = "raw"


class JsonlWriter:
    """Appends rows (dicts) to RUN/raw/<table>.<pid>.jsonl in batches.

    The file is opened O_APPEND|O_CREAT|O_NOFOLLOW with mode 0600: a link planted
    at its name gets nothing (OSError here). Lines that cannot be written (a full
    disk, a file-size limit) are counted in `dropped`, never raised; `error` keeps
    the first cause. After an error, lines are only counted for RETRY_S seconds
    before the next try: no system call per flush on a disk that stays full.
    """

    RETRY_S = 10.0

    def __init__(self, run_dir: str, table: str, flush_rows: int = 256, flush_s: float = 0.5) -> None:
        raw = os.path.join(run_dir, RAW_DIR)
        os.makedirs(raw, exist_ok=True)
        self.path = os.path.join(raw, f"{table}.{os.getpid()}.jsonl")
        self._fd = os.open(self.path, WRITE_FLAGS, 0o600)
        self._buf: list[str] = []
        self._lock = threading.Lock()
        self._flush_rows = flush_rows
        self._flush_s = flush_s
        self._last_flush = time.monotonic()
        self.written = 0  # lines written whole
        self.dropped = 0  # lines lost to write errors
        self.error = ""  # the first write error, e.g. "EFBIG: File too large"
        self._retry_at = 0.0  # while monotonic() is below it, lines are counted, not written
        self._torn = False  # the last write stopped inside a line: end it before the next one

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

    def failing(self) -> bool:
        """True while writes are suspended after an error (callers may count rows instead of formatting them)."""
        return self._retry_at > time.monotonic()

    def drop(self, n: int) -> None:
        """Count `n` lines the caller did not hand over (see `failing`)."""
        with self._lock:
            self.dropped += n

    def flush(self) -> None:
        with self._lock:
            if not self._buf or self._fd < 0:
                return
            lines, self._buf = self._buf, []
            now = self._last_flush = time.monotonic()
            if self._retry_at > now:
                self.dropped += len(lines)
                return
            lead = b"\n" if self._torn else b""
            data = lead + ("\n".join(lines) + "\n").encode()
            done = 0
            try:
                while done < len(data):
                    done += os.write(self._fd, data[done:])  # a short write near a size limit: go on
                self.written += len(lines)
                self._torn = False
                self._retry_at = 0.0
            except OSError as exc:  # never hurt the target: count what is lost, say why
                whole = max(0, data.count(b"\n", 0, done) - (1 if lead and done else 0))
                self.written += whole
                self.dropped += len(lines) - whole
                self._torn = (self._torn and done == 0) or (done > 0 and data[done - 1:done] != b"\n")
                self.error = self.error or os_error_text(exc)
                self._retry_at = now + self.RETRY_S

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


# Files diag appends to in raw/: never through a planted link, never inherited by a child's exec.
WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def os_error_text(exc: OSError) -> str:
    """'EFBIG: File too large': the errno name first, so readers can map it to a cause."""
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return f"{name}: {exc.strerror or exc}"


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
