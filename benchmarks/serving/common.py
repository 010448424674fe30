"""What the serving benchmarks share: the server's own timing (appended per process) and the uncached read."""

from __future__ import annotations

import os
import time
from typing import Any

TIMES_DIR = os.environ.get("SERVE_TIMES", "")
READ_BYTES = 16 << 20
DATA_FILE = os.environ.get("SERVE_DATA", "/tmp/diag_serving_blob.bin")

_times_file: Any = None


def record_time(ms: float, start_ns: int) -> None:
    """Append one handler's start (wall ns) and time (ms) to SERVE_TIMES/times.<pid>.txt: every worker
    process, however it exits. The start lets a test compare over the window diag calls steady."""
    global _times_file
    if not TIMES_DIR:
        return
    if _times_file is None:
        _times_file = open(os.path.join(TIMES_DIR, f"times.{os.getpid()}.txt"), "a", buffering=1)  # noqa: SIM115
    _times_file.write(f"{start_ns} {ms:.4f}\n")


class Timed:
    """The server's own timing, at the ASGI boundary (the app call, as a timing middleware sees it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.inner(scope, receive, send)
            return
        wall, t0 = time.time_ns(), time.perf_counter()
        try:
            await self.inner(scope, receive, send)
        finally:
            record_time((time.perf_counter() - t0) * 1e3, wall)


class TimedWsgi:
    """The server's own timing at the WSGI boundary (the app call and its body, as a timing middleware)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, environ: Any, start_response: Any) -> Any:
        wall, t0 = time.time_ns(), time.perf_counter()
        try:
            return list(self.inner(environ, start_response))
        finally:
            record_time((time.perf_counter() - t0) * 1e3, wall)


def ensure_blob() -> None:
    """The 16 MB file the read variant reads."""
    if not os.path.exists(DATA_FILE):
        with open(DATA_FILE, "wb") as f:
            f.write(os.urandom(READ_BYTES))


def read_blob() -> int:
    """16 MB read with the page cache dropped first: every request goes to disk."""
    fd = os.open(DATA_FILE, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        n = 0
        while chunk := os.read(fd, 1 << 20):
            n += len(chunk)
        return n
    finally:
        os.close(fd)
