"""diag's small in-program API: `diag.request()` and `diag.stage(name)`.

Both are context managers (and decorators). Under `diag profile` they record a
range into the run's `ranges` table; otherwise they do nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


@contextlib.contextmanager
def _range(name: str) -> Iterator[None]:
    from diag.collect.recorder import active_recorder

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
