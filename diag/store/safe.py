"""Reading files a hostile or unlucky user may hand diag, safely.

Every reader of run directories, traces and rule files goes through here, so
one set of rules holds everywhere:

- regular files only: opened with O_NONBLOCK (a FIFO never blocks the open)
  and, inside a run directory, O_NOFOLLOW (a planted symlink to /dev/zero or
  elsewhere is refused); fstat must say S_ISREG before a byte is read;
- bounded reads: a size cap for plain files and a decompressed-size cap for
  gzip, read in chunks and counted, so a bomb stops early in little memory;
- JSON with finite numbers only (NaN, Infinity, 1e400 are refused), and a
  nesting depth too deep for the parser is an error, not a RecursionError;
- integers checked against int64 (`int64`) where a column expects one.

Failures are DiagError, one line naming the file. Standard library only: the
recording side (jsonl.py, manifest.py) imports this module.
"""

from __future__ import annotations

import json
import math
import os
import stat
import zlib
from collections.abc import Iterator
from typing import Any

from diag.errors import DiagError

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
GiB = 1 << 30
CHUNK = 1 << 20
# Defaults admit multi-GB traces; the environment may raise or lower them.
DEFAULT_MAX_TRACE_BYTES = 16 * GiB
DEFAULT_GZIP_RATIO = 100  # real Kineto traces compress 5-30x; gzip's own ceiling is ~1000x
GZIP_FLOOR = 64 << 20  # below this many decompressed bytes the ratio is not checked
MAX_SMALL_BYTES = 64 << 20  # run.json, rule and policy files
MAX_LINE_BYTES = 64 << 20  # one raw JSON line


def env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        raise DiagError(f"{name}={os.environ[name]!r}: not a number") from None
    if not math.isfinite(value) or value < 0:
        raise DiagError(f"{name}={os.environ[name]!r}: must be a finite number >= 0")
    return value


def max_trace_bytes() -> int:
    """The largest trace or raw file read, plain or decompressed (env DIAG_MAX_TRACE_BYTES)."""
    return int(env_number("DIAG_MAX_TRACE_BYTES", DEFAULT_MAX_TRACE_BYTES))


def max_gzip_ratio() -> float:
    """Decompressed/compressed size above which a gzip is taken for a bomb (env DIAG_MAX_GZIP_RATIO)."""
    return env_number("DIAG_MAX_GZIP_RATIO", DEFAULT_GZIP_RATIO)


def too_big(path: str, limit: int, what: str = "file") -> DiagError:
    return DiagError(f"{path}: {what} larger than {limit} bytes (raise DIAG_MAX_TRACE_BYTES to read it)")


def open_regular(path: str, follow: bool = True) -> Any:
    """A binary file object on `path`, which must be a regular file.

    `follow=False` for files inside a run directory: a symlink there is refused.
    The open never blocks (O_NONBLOCK), so a FIFO is refused, not waited on.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise DiagError(f"{path}: a symlink, not a file diag wrote (refused)") from None
        raise DiagError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DiagError(f"{path}: not a regular file (refused)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bytes(path: str, limit: int | None = None, follow: bool = True) -> bytes | bytearray:
    """The whole of a regular file, at most `limit` bytes (default: max_trace_bytes()); gzip unpacked."""
    limit = max_trace_bytes() if limit is None else limit
    with open_regular(path, follow) as f:
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            return _gunzip(path, f, limit)
        if os.fstat(f.fileno()).st_size > limit:
            raise too_big(path, limit)
        data = f.read(limit + 1)  # the size may have grown since fstat
    if len(data) > limit:
        raise too_big(path, limit)
    return data


def _gunzip(path: str, f: Any, limit: int) -> bytearray:
    """Decompress gzip members in chunks, stopping at `limit` or at a bomb's ratio."""
    out = bytearray()
    for chunk in chunks(path, f, limit):
        out += chunk
    return out  # not bytes(out): no second copy of a large trace


def chunks(path: str, f: Any, limit: int) -> Iterator[bytes]:
    """The bytes of open file `f` in chunks of at most CHUNK, gzip members unpacked.

    DiagError (one line) past `limit` bytes, at a gzip bomb's ratio, or on corrupt gzip.
    """
    size = os.fstat(f.fileno()).st_size
    head = f.read(2)
    f.seek(0)
    if head != b"\x1f\x8b":
        if size > limit:
            raise too_big(path, limit)
        total = 0
        while chunk := f.read(CHUNK):
            total += len(chunk)
            if total > limit:  # the file may have grown since fstat
                raise too_big(path, limit)
            yield chunk
        return
    cap = min(limit, max(GZIP_FLOOR, int(max(1, size) * max_gzip_ratio())))
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
    total = 0
    try:
        while True:
            chunk = d.unconsumed_tail or d.unused_data or f.read(CHUNK)
            if not chunk:
                return
            if d.eof:  # another gzip member follows
                d = zlib.decompressobj(zlib.MAX_WBITS | 16)
            out = d.decompress(chunk, CHUNK)
            total += len(out)
            if total > cap:
                if cap < limit:
                    raise DiagError(f"{path}: decompresses to over {max_gzip_ratio():g}x its size: refused "
                                    f"as a gzip bomb (raise DIAG_MAX_GZIP_RATIO to read it)")
                raise too_big(path, limit, "decompressed file")
            if out:
                yield out
    except zlib.error as exc:
        raise DiagError(f"{path}: corrupt gzip ({exc})") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number diag accepts")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} out of range")
    return value


# The number rules of every JSON diag reads (NaN, Infinity and 1e400 refused), for json.loads
# and json.JSONDecoder alike.
NUMBER_RULES: dict[str, Any] = {"parse_constant": _reject_constant, "parse_float": _finite_float}


def loads(data: bytes | bytearray | str) -> Any:
    """json.loads with finite numbers only; ValueError for anything else wrong, nesting included."""
    try:
        return json.loads(data, **NUMBER_RULES)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def load_json(path: str, limit: int | None = None, follow: bool = True) -> Any:
    """A JSON document from a regular file (gzip allowed); DiagError, one line, if it is none."""
    data = read_bytes(path, limit, follow)
    try:
        return loads(data)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise DiagError(f"{path}: not valid JSON ({_first_line(exc)})") from None


def read_text(path: str, limit: int = MAX_SMALL_BYTES, follow: bool = True) -> str:
    """A small UTF-8 text file (rules, policy); DiagError naming the file if it is not one."""
    data = read_bytes(path, limit, follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DiagError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def iter_lines(path: str, follow: bool = False) -> Iterator[bytes]:
    """The lines of a raw JSON-lines file, at most max_trace_bytes() in all; a line longer than
    MAX_LINE_BYTES is yielded as b"" (not JSON: the caller counts it as bad)."""
    limit = max_trace_bytes()
    total = 0
    with open_regular(path, follow) as f:
        while True:
            line = f.readline(MAX_LINE_BYTES)
            if not line:
                return
            total += len(line)
            if total > limit:
                raise too_big(path, limit)
            if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := f.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    total += len(rest)
                    if total > limit:
                        raise too_big(path, limit)
                line = b""
            yield line


def int64(value: Any) -> int | None:
    """`value` as an int within int64, or None: bools, NaN, inf, 1e400, 2**63, text are None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, float) and math.isfinite(value) and -(2.0**63) <= value < 2.0**63:
        return int(value)
    return None


def number(value: Any) -> float | int | None:
    """A finite int64 or float as itself, else None (bool counts as a number: flags are 0/1)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [exc.__class__.__name__])[0][:160]
