"""diag's small in-program API: `diag.request()` and `diag.stage(name)`.

Both are context managers (and decorators). Under `diag profile` they record a
range into the run's `ranges` table; otherwise they do nothing. Nesting
(`depth`) is tracked per context (contextvars), so they are safe in asyncio:
concurrent requests on one event loop do not stack up. A range opened inside a
request found by the server hooks (ASGI, WSGI, generate) carries its `rid`.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

# Where a process's recorder lives: under the bootstrap's private package name
# (diag/collect/bootstrap/sitecustomize.py, PRIVATE), or under diag's own name when a
# program starts one itself (tests). Only looked up: never imported from here.
RECORDER_MODULES = ("_diag_rec.collect.recorder", "diag.collect.recorder")


def _recorder_module() -> Any:
    """The recorder module holding this process's active recorder, or None outside `diag profile`."""
    for name in RECORDER_MODULES:
        module = sys.modules.get(name)
        if module is not None and module.active_recorder() is not None:
            return module
    return None


def active_recorder() -> Any:
    """This process's recorder, or None outside `diag profile`."""
    module = _recorder_module()
    return module.active_recorder() if module is not None else None


@contextlib.contextmanager
def _range(name: str) -> Iterator[None]:
    module = _recorder_module()
    if module is None:
        yield
        return
    rec = module.active_recorder()
    # Open ranges are counted per context, not per thread: coroutines interleaved on one
    # event loop each have their own depth (asyncio gives every task a copy of the context).
    depth_var = module.RANGE_DEPTH
    depth = depth_var.get()
    token = depth_var.set(depth + 1)
    start = time.time_ns()
    try:
        yield
    finally:
        end = time.time_ns()
        try:
            depth_var.reset(token)
        except ValueError:  # exited in another context than entered (a generator moved across tasks)
            depth_var.set(depth)
        rec.range(name, start, end - start, source="diag", depth=depth)


def request() -> contextlib.AbstractContextManager[None]:
    """One request, from its arrival to its completion."""
    return _range("request")


def stage(name: str) -> contextlib.AbstractContextManager[None]:
    """A named stage of the program (preprocess, load_model...)."""
    return _range(name)
