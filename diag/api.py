"""diag's small in-program API: `diag.request()` and `diag.stage(name)`.

Both are context managers (and decorators). Under `diag profile` they record a
range into the run's `ranges` table; otherwise they do nothing.
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


def active_recorder() -> Any:
    """This process's recorder, or None outside `diag profile`."""
    for name in RECORDER_MODULES:
        module = sys.modules.get(name)
        rec = module.active_recorder() if module is not None else None
        if rec is not None:
            return rec
    return None


@contextlib.contextmanager
def _range(name: str) -> Iterator[None]:
    rec = active_recorder()
    if rec is None:
        yield
        return
    state = rec.state  # per thread: ranges open now, shared with the NVTX hooks
    depth = state.range_depth
    state.range_depth = depth + 1
    start = time.time_ns()
    try:
        yield
    finally:
        state.range_depth = depth
        rec.range(name, start, time.time_ns() - start, source="diag", depth=depth)


def request() -> contextlib.AbstractContextManager[None]:
    """One request, from its arrival to its completion."""
    return _range("request")


def stage(name: str) -> contextlib.AbstractContextManager[None]:
    """A named stage of the program (preprocess, load_model...)."""
    return _range(name)
