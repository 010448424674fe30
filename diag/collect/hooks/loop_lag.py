"""A light event-loop lag probe: how late a callback scheduled every 100 ms really runs.

Started on a running asyncio loop by the ASGI hooks (uvicorn's server start-up,
or the first request an ASGI app serves). Each tick writes one `loop_lag` row
(docs/run-format.md): a loop busy with Python work or blocked in a call
inside an `async def` runs the tick late by about as long as it was held. The
tick costs a few microseconds (tests/test_serving_asgi.py measures it), about
0.005% of one core at 10 ticks a second.
"""

from __future__ import annotations

import contextvars
import sys
import time
import weakref
from typing import Any

from ..request_context import thread_role, watch_thread_roles

INTERVAL_S = 0.1

_PROBED: weakref.WeakSet[Any] = weakref.WeakSet()
_time_ns = time.time_ns


class LoopProbe:
    """Reschedules itself on `loop` every INTERVAL_S and records how late it ran."""

    def __init__(self, rec: Any, loop: Any, tid: int, interval_s: float = INTERVAL_S) -> None:
        self.rec = rec
        self.loop = loop
        self.tid = tid
        self.interval_s = interval_s
        self.due = 0.0
        # An empty context: the tick must not keep the request it was started in alive.
        self.context = contextvars.Context()

    def schedule(self) -> None:
        """Schedule the next tick, INTERVAL_S from now."""
        self.due = self.loop.time() + self.interval_s
        self.loop.call_at(self.due, self.tick, context=self.context)

    def tick(self) -> None:
        """Record this tick's lag (seconds late, on the loop's own clock), then schedule the next."""
        lag = self.loop.time() - self.due
        rec = self.rec
        w = rec.weight("loop_lag")
        if w:
            rec.write("loop_lag", {"ts_ns": _time_ns(), "tid": self.tid,
                                   "lag_ns": int(lag * 1e9) if lag > 0 else 0, "weight": w})
        if not self.loop.is_closed():
            self.schedule()


def ensure_probe(rec: Any, loop: Any = None) -> None:
    """Start the probe on `loop` (default: the running loop of this thread) unless it runs there. Never raises."""
    try:
        asyncio = sys.modules.get("asyncio")
        if asyncio is None:
            return
        if loop is None:
            loop = asyncio.get_running_loop()
        if loop in _PROBED:
            return
        _PROBED.add(loop)
        tid = rec.tid()
        thread_role(rec, "event_loop")
        watch_thread_roles(rec)
        probe = LoopProbe(rec, loop, tid)
        rec.event("loop_probe", type(loop).__name__, interval_ns=int(INTERVAL_S * 1e9))
        probe.schedule()
    except Exception:  # noqa: BLE001 - no running loop, a loop without weakrefs: no probe
        pass
