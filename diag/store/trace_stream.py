"""Reading a chrome-trace JSON one event at a time, in little memory.

`json.loads` of a whole trace holds every event as Python objects at once (~6x
the file size). Here the `traceEvents` array is scanned in chunks and each
event decoded on its own with the standard library's C decoder, so only the
event being read and the small top-level fields (deviceProperties,
distributedInfo, baseTimeNanoseconds) are ever held.

The rules of diag/store/safe.py hold: a regular file only (open_regular), the
size cap on plain bytes, the size and ratio caps on gzip, finite numbers only,
and too deep a nesting is a ValueError, not a RecursionError.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any

from diag.store.safe import NUMBER_RULES, chunks, max_trace_bytes, open_regular

MAX_EVENT_CHARS = 64 << 20  # one event (or top-level value) larger than this is refused
# After a decoded value, this many characters must follow in the buffer (or the file
# end): a number cut at a chunk's end ("12" of "125", "1." of "1.5") decodes as a shorter one.
_MARGIN = 64
_WS = re.compile(r"[ \t\n\r]*")


_DECODER = json.JSONDecoder(**NUMBER_RULES)  # the same number rules as safe.loads


def _chunks(path: str, follow: bool) -> Iterator[bytes]:
    """The bytes of a regular file in chunks, gzip unpacked, within safe.py's caps."""
    with open_regular(path, follow) as f:
        yield from chunks(path, f, max_trace_bytes())


class _Scanner:
    """A text buffer over the chunks, and JSON values decoded from it one by one."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.text = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self) -> None:
        """Append the next chunk (dropping what is consumed); sets eof at the end."""
        data = next(self.chunks, None)
        if data is None:
            self.eof = True
            tail = self.text.decode(b"", final=True)  # a cut multi-byte character is a ValueError
        else:
            tail = self.text.decode(data)
        self.buf = self.buf[self.pos:] + tail
        self.pos = 0

    def peek(self) -> str:
        """The next non-blank character ('' at the end), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self.more()

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise ValueError(f"expected one of {chars!r} at character {self.pos}, found {c[:1]!r}")
        self.pos += 1
        return c

    def value(self) -> Any:
        """The next JSON value, decoded with safe.py's number rules."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self.eof:
                    raise
                if len(self.buf) - self.pos > MAX_EVENT_CHARS:
                    raise ValueError(f"a trace event larger than {MAX_EVENT_CHARS} characters") from None
                self.more()  # most often a value cut at the chunk's end
                continue
            except RecursionError:
                raise ValueError("nested too deeply") from None
            if end + _MARGIN > len(self.buf) and not self.eof:
                self.more()
                continue
            self.pos = end
            return value


def stream_trace(path: str, top: dict[str, Any], follow: bool = True) -> Iterator[Any]:
    """The items of a trace's `traceEvents`, one at a time; `top` gets its other top-level fields.

    Fields after the array (Kineto writes baseTimeNanoseconds there) are in `top`
    once the iterator is exhausted. A bare event list is read as traceEvents.
    ValueError on a file that is no trace (as json.loads would give), DiagError on
    one diag refuses to read (not a regular file, over the caps).
    """
    s = _Scanner(_chunks(path, follow))
    first = s.expect("{[")
    if first == "[":
        yield from _array(s)
    else:
        found = False
        if s.peek() == "}":
            s.pos += 1
        else:
            while True:
                key = s.value()
                if not isinstance(key, str):
                    raise ValueError("object key is not a string")
                s.expect(":")
                if key == "traceEvents" and s.peek() == "[":
                    s.pos += 1
                    found = True
                    yield from _array(s)
                else:
                    top[key] = s.value()
                if s.expect(",}") == "}":
                    break
        if not found:
            raise ValueError("no traceEvents list")
    if s.peek():
        raise ValueError(f"extra data at character {s.pos}")


def _array(s: _Scanner) -> Iterator[Any]:
    """The items of an array whose '[' is consumed, through its ']'."""
    if s.peek() == "]":
        s.pos += 1
        return
    while True:
        yield s.value()
        if s.expect(",]") == "]":
            return
