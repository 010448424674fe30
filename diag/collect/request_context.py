"""Requests and what is open in the current context: the `requests` table and thread roles.

The server hooks (hooks/asgi.py, hooks/wsgi.py, hooks/generate.py) open a
`Request` when a request reaches the program and `finish` it when its
response is complete: one row of the `requests` table each
(docs/run-format.md). What is open lives in context variables, not per
thread, so interleaved coroutines of one event loop each see their own
request and their own `diag.stage()` depth, and `asyncio.to_thread` work sees
the request that started it (it copies the context).

Standard library only: this runs inside the target.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import os
import threading
import time
from typing import Any

# The hooked request open in this context (None outside one), and how many diag
# ranges (diag.request / diag.stage) are open in it.
CURRENT_REQUEST: contextvars.ContextVar[Request | None] = contextvars.ContextVar("diag_request", default=None)
RANGE_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("diag_range_depth", default=0)

_RIDS = itertools.count(1)  # request ids of this process; 0 means none
_time_ns = time.time_ns
MAX_TOKEN_TIMES = 4096  # per-token times kept per generate() call


class Request:
    """One request being served. Times are `time.time_ns()`; 0 = not seen (yet)."""

    __slots__ = ("rid", "parent", "source", "server", "arrival_ns", "arrival", "start_ns", "handler_end_ns",
                 "resp_start_ns", "method", "route", "status", "req_bytes", "resp_bytes", "tid", "task",
                 "error", "model", "batch", "tokens_in", "tokens_out", "forwards", "ttft_ns", "prefill_ns",
                 "token_ns", "done")

    def __init__(self, source: str, server: str, tid: int, arrival_ns: int = 0, arrival: str = "call") -> None:
        self.rid = next(_RIDS)
        parent = CURRENT_REQUEST.get()
        self.parent = parent.rid if parent is not None else 0
        self.source = source
        self.server = server
        self.start_ns = _time_ns()  # the handler (app call, generate call) starts now
        self.arrival_ns = arrival_ns if 0 < arrival_ns <= self.start_ns else self.start_ns
        self.arrival = arrival if arrival_ns else "call"
        self.handler_end_ns = 0
        self.resp_start_ns = 0
        self.method = ""
        self.route = ""
        self.status = 0
        self.req_bytes = -1
        self.resp_bytes = 0
        self.tid = tid
        self.task = ""
        self.error = ""
        self.model = ""
        self.batch = -1
        self.tokens_in = -1
        self.tokens_out = -1
        self.forwards = -1
        self.ttft_ns = -1
        self.prefill_ns = -1
        self.token_ns: list[int] | None = None
        self.done = False

    def row(self, end_ns: int, weight: int) -> dict[str, Any]:
        """The `requests` row (docs/run-format.md, "requests")."""
        a = self.arrival_ns
        handler_end = self.handler_end_ns or end_ns
        return {
            "ts_ns": a, "dur_ns": max(0, end_ns - a), "tid": self.tid, "rid": self.rid, "parent": self.parent,
            "source": self.source, "server": self.server, "method": self.method, "route": self.route,
            "status": self.status, "req_bytes": self.req_bytes, "resp_bytes": self.resp_bytes,
            "arrival": self.arrival, "wait_ns": self.start_ns - a, "handler_ns": max(0, handler_end - self.start_ns),
            "resp_start_ns": self.resp_start_ns - a if self.resp_start_ns else -1, "task": self.task,
            "error": self.error, "model": self.model, "batch": self.batch, "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out, "forwards": self.forwards, "ttft_ns": self.ttft_ns,
            "prefill_ns": self.prefill_ns,
            "token_ns": json.dumps(self.token_ns[:MAX_TOKEN_TIMES], separators=(",", ":")) if self.token_ns else "",
            "weight": weight,
        }

    def finish(self, rec: Any, end_ns: int | None = None) -> None:
        """Write the request's row once (later calls do nothing). Never raises."""
        if self.done:
            return
        self.done = True
        try:
            w = rec.weight("requests")
            if w:
                rec.write("requests", self.row(_time_ns() if end_ns is None else end_ns, w))
        except Exception:  # noqa: BLE001 - never hurt the target
            pass


# -- thread roles ---------------------------------------------------------------

_ROLES_SEEN: set[tuple[int, str]] = set()
_ROLES_LOCK = threading.Lock()

# Thread-name prefixes of pool threads: the event loop's default executor (run_in_executor(None),
# asyncio.to_thread) names its threads asyncio_N, or uvloop_N under uvloop (uvicorn's loop where it
# is installed, as with uvicorn[standard]); concurrent.futures ThreadPoolExecutor-N_M.
NAMED_ROLES = (("asyncio_", "loop_executor"), ("uvloop_", "loop_executor"), ("ThreadPoolExecutor-", "executor"))


def thread_role(rec: Any, role: str, tid: int = 0, name: str = "", ident: int = 0) -> None:
    """Record once that a thread has a role (a `thread_role` event; default: this thread)."""
    if not tid:
        tid = rec.tid()
        t = threading.current_thread()
        name, ident = t.name, t.ident or 0
    key = (tid, role)
    if key in _ROLES_SEEN:
        return
    with _ROLES_LOCK:
        if key in _ROLES_SEEN:
            return
        _ROLES_SEEN.add(key)
    rec.event("thread_role", role, tid=tid, thread_name=name, ident=ident)


def _named_roles(rec: Any, final: bool = False) -> None:
    """A flush hook: give pool threads seen since the last flush their role by name."""
    for t in threading.enumerate():
        native = getattr(t, "native_id", None)
        if not native:
            continue
        for prefix, role in NAMED_ROLES:
            if t.name.startswith(prefix):
                thread_role(rec, role, native, t.name, t.ident or 0)


def watch_thread_roles(rec: Any) -> None:
    """Start naming pool threads by their thread names, once per recorder (serving hooks call it)."""
    if getattr(rec, "_diag_roles_watched", False):
        return
    rec._diag_roles_watched = True
    rec.flush_hooks.append(lambda final: _named_roles(rec, final))


def reset_after_fork() -> None:
    """A forked child (a gunicorn worker) has new thread ids: forget the roles seen."""
    _ROLES_SEEN.clear()


def server_identity(rec: Any, server: str, role: str, **detail: Any) -> None:
    """A `server` event: what this process is for its server (docs/run-format.md)."""
    try:
        rec.event("server", server, role=role, **detail)
    except Exception:  # noqa: BLE001
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reset_after_fork)
