"""nvtx package hooks: ranges from `annotate`, `push_range/pop_range`,
`start_range/end_range`, and `mark` events.

Installed by diag.collect.hooks right after the target imports `nvtx`. The
module attributes are replaced by thin wrappers that record a range (source
`nvtx`, `domain` as given, `""` for NVTX's default domain) and always call the
real function, so Nsight Systems still sees every range. `nvtx.annotate`
becomes a subclass that records both as a context manager and as a decorator.
A range named `request` gets kind `request`, any other kind `stage`.
Not hooked: `Domain.push_range` and the other Domain methods (used directly
only by code tuned for NVTX speed).
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

_time_ns = time.time_ns


class _Stacks(threading.local):
    """This thread's open push_range ranges, one stack per domain ("" for NVTX's default)."""

    def __init__(self) -> None:
        self.by_domain: dict[str, list[tuple[str, int, int]]] = {}


class _RangeId(tuple):
    """start_range's id when the real nvtx returned none (disabled): ours to match."""


def install(rec: Any, nvtx: Any) -> None:
    """Hook an imported nvtx module (see the module docstring)."""
    state = rec.state
    local = _Stacks()
    started: dict[Any, tuple[str, str, int]] = {}
    record = rec.range

    def begin(name: Any, domain: Any) -> tuple[str, int, int]:
        depth = state.range_depth
        state.range_depth = depth + 1
        return (name if type(name) is str else str(name or ""), _time_ns(), depth)

    def finish(entry: tuple[str, int, int], domain: Any) -> None:
        name, ts, depth = entry
        state.range_depth = depth
        record(name, ts, _time_ns() - ts, "nvtx", "" if domain is None else str(domain or ""), depth)

    orig_annotate = nvtx.annotate
    orig_push, orig_pop = nvtx.push_range, nvtx.pop_range
    orig_start, orig_end, orig_mark = nvtx.start_range, nvtx.end_range, nvtx.mark

    class annotate(orig_annotate):  # type: ignore[misc, valid-type]
        __doc__ = orig_annotate.__doc__

        def __init__(self, message: Any = None, color: Any = None, domain: Any = None,
                     category: Any = None, payload: Any = None) -> None:
            super().__init__(message, color, domain, category, payload)
            self._diag = (message, domain)
            self._diag_open: list[tuple[str, int, int]] = []

        def __enter__(self) -> Any:
            out = super().__enter__()
            self._diag_open.append(begin(self._diag[0], self._diag[1]))
            return out

        def __exit__(self, *exc: Any) -> Any:
            try:
                if self._diag_open:
                    finish(self._diag_open.pop(), self._diag[1])
            except Exception:  # noqa: BLE001 - never hurt the target
                pass
            return super().__exit__(*exc)

        def __call__(self, func: Any) -> Any:
            inner = super().__call__(func)
            message, domain = self._diag
            name = message if message is not None else getattr(func, "__name__", "")

            @functools.wraps(func)
            def recorded(*args: Any, **kwargs: Any) -> Any:
                entry = begin(name, domain)
                try:
                    return inner(*args, **kwargs)
                finally:
                    finish(entry, domain)

            return recorded

    annotate.__name__ = annotate.__qualname__ = "annotate"
    annotate.__module__ = orig_annotate.__module__

    # push_range / pop_range: the hot pair (a program may push a million ranges), so begin()
    # and finish() are written out in them: each costs two clock reads and a tuple.
    def push_range(message: Any = None, color: Any = "blue", domain: Any = None, category: Any = None,
                   payload: Any = None) -> Any:
        out = orig_push(message, color, domain, category, payload)
        key = "" if domain is None else str(domain or "")
        stack = local.by_domain.get(key)
        if stack is None:
            stack = local.by_domain[key] = []
        depth = state.range_depth
        state.range_depth = depth + 1
        stack.append((message if type(message) is str else str(message or ""), _time_ns(), depth))
        return out

    def pop_range(domain: Any = None) -> Any:
        out = orig_pop(domain)
        key = "" if domain is None else str(domain or "")
        stack = local.by_domain.get(key)
        if stack:
            name, ts, depth = stack.pop()
            state.range_depth = depth
            record(name, ts, _time_ns() - ts, "nvtx", key, depth)
        return out

    def start_range(message: Any = None, color: Any = None, domain: Any = None, category: Any = None,
                    payload: Any = None) -> Any:
        rid = orig_start(message, color, domain, category, payload)
        ts = _time_ns()
        key = rid if rid is not None else _RangeId((id(started), ts, len(started)))
        try:
            started[key] = (str(message or ""), str(domain or ""), ts)
        except TypeError:  # an unhashable id: cannot match its end
            return rid
        return key if rid is None else rid

    def end_range(range_id: Any) -> Any:
        got = None
        try:
            got = started.pop(range_id, None)
        except TypeError:
            pass
        out = orig_end(None if isinstance(range_id, _RangeId) else range_id)
        if got is not None:
            name, domain, ts = got
            rec.range(name, ts, _time_ns() - ts, source="nvtx", domain=domain, depth=0)
        return out

    def mark(message: Any = None, color: Any = "blue", domain: Any = None, category: Any = None,
             payload: Any = None) -> Any:
        out = orig_mark(message, color, domain, category, payload)
        rec.event("mark", str(message or ""), source="nvtx", domain=str(domain or ""))
        return out

    for fn, orig in ((push_range, orig_push), (pop_range, orig_pop), (start_range, orig_start),
                     (end_range, orig_end), (mark, orig_mark)):
        fn.__wrapped__ = orig  # type: ignore[attr-defined]
        fn.__doc__ = orig.__doc__
    replacements = {"annotate": annotate, "push_range": push_range, "pop_range": pop_range,
                    "start_range": start_range, "end_range": end_range, "mark": mark}
    inner_module = getattr(nvtx, "nvtx", None)  # nvtx.nvtx holds the originals
    for attr, value in replacements.items():
        setattr(nvtx, attr, value)
        if inner_module is not None and getattr(inner_module, attr, None) is not None:
            setattr(inner_module, attr, value)
