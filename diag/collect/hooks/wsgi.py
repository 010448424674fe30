"""WSGI requests, found with no code change (Flask under gunicorn or werkzeug; any app under gunicorn).

Like OpenTelemetry's WSGI instrumentation, the WSGI app the server calls is
wrapped, with its `start_response` (status) and its response iterable (body
bytes; the request ends when the server closes the iterable, after the last
byte is written). Installed lazily when the target imports (WATCHED):

- `gunicorn.workers.base`: `Worker.load_wsgi` wraps the worker's app,
  outermost; `Worker.init_process` records the worker's `server` event
  (gunicorn's worker age as its index, its master, its listeners).
- `gunicorn.workers.sync` / `gunicorn.workers.gthread`: the request's
  arrival: the sync worker's `handle` (connection accepted, before parsing:
  `arrival` = `accepted`); the threaded worker's `enqueue_req` (connection
  ready, handed to the thread pool: `arrival` = `queued`, so time waiting
  for a free thread is seen).
- `gunicorn.arbiter`: `Arbiter.start` records the master's `server` event.
- `flask.app`: `Flask.__call__` for any other server (werkzeug's dev server,
  waitress...) and `Flask.full_dispatch_request` for the route template
  (`url_rule.rule`, never the raw path).

A request already open in the context (the gunicorn wrapper around a Flask
app) is not opened twice.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import Any

from ..request_context import CURRENT_REQUEST, Request, server_identity, thread_role, watch_thread_roles

_time_ns = time.time_ns
_arrivals = threading.local()  # arrival (ns, kind) set by the server hook, taken by the wrapper on the same thread


def _take_arrival() -> tuple[int, str]:
    value = getattr(_arrivals, "value", None)
    if value is None:
        return 0, "call"
    _arrivals.value = None
    return value


def _content_length(environ: dict[str, Any]) -> int:
    try:
        return int(environ.get("CONTENT_LENGTH") or -1)
    except (TypeError, ValueError):
        return -1


class _Body:
    """The app's response iterable, counted; the request ends when the server closes it."""

    def __init__(self, body: Any, req: Request, rec: Any) -> None:
        self._body = body
        self._req = req
        self._rec = rec

    def __iter__(self) -> Any:
        req = self._req
        for chunk in self._body:
            req.resp_bytes += len(chunk)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._req.finish(self._rec)


def call_wsgi(rec: Any, app: Any, server: str, environ: dict[str, Any], start_response: Any) -> Any:
    """Call a WSGI `app` for one request and arrange for its `requests` row."""
    arrival, kind = _take_arrival()
    req = Request("wsgi", server, rec.tid(), arrival, kind)
    req.method = str(environ.get("REQUEST_METHOD") or "")
    req.req_bytes = _content_length(environ)
    thread_role(rec, "request_thread")

    def start_seen(status: str, headers: Any, exc_info: Any = None) -> Any:
        try:
            req.status = int(str(status).split(None, 1)[0])
        except (ValueError, IndexError):
            pass
        if not req.resp_start_ns:
            req.resp_start_ns = _time_ns()
        return start_response(status, headers, exc_info) if exc_info is not None else start_response(status, headers)

    token = CURRENT_REQUEST.set(req)
    try:
        body = app(environ, start_seen)
    except BaseException as exc:
        req.error = type(exc).__name__
        req.status = req.status or 500
        req.handler_end_ns = _time_ns()
        req.finish(rec, req.handler_end_ns)
        raise
    finally:
        CURRENT_REQUEST.reset(token)
    req.handler_end_ns = _time_ns()
    file_wrapper = environ.get("wsgi.file_wrapper")
    if isinstance(file_wrapper, type) and isinstance(body, file_wrapper):
        # Left as is, so the server can still sendfile() it: the request ends here.
        req.finish(rec, req.handler_end_ns)
        return body
    return _Body(body, req, rec)


class WsgiApp:
    """A WSGI app wrapped so that each request it serves is recorded."""

    def __init__(self, app: Any, rec: Any, server: str) -> None:
        self.app = app
        self._rec = rec
        self._server = server

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def __call__(self, environ: Any, start_response: Any) -> Any:
        if CURRENT_REQUEST.get() is not None:
            return self.app(environ, start_response)
        return call_wsgi(self._rec, self.app, self._server, environ, start_response)


def _listen(sockets: Any) -> list[str]:
    out = []
    for sock in sockets or ():
        try:
            name = sock.getsockname()
            out.append(f"{name[0]}:{name[1]}" if isinstance(name, tuple) else str(name))
        except Exception:  # noqa: BLE001
            pass
    return out


# -- installers --------------------------------------------------------------------

def _gunicorn_worker(rec: Any, module: Any) -> None:
    cls = module.Worker
    orig_load = cls.load_wsgi
    orig_init = cls.init_process

    @functools.wraps(orig_load)
    def load_wsgi(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig_load(self, *args, **kwargs)
        try:
            if not isinstance(self.wsgi, WsgiApp):
                self.wsgi = WsgiApp(self.wsgi, rec, "gunicorn")
        except Exception as exc:  # noqa: BLE001
            rec.note("hooks.wsgi", f"gunicorn app not wrapped: {exc!r}")
        return out

    @functools.wraps(orig_init)
    def init_process(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            age = int(getattr(self, "age", 0) or 0)
            server_identity(rec, "gunicorn", "worker", worker_index=age - 1 if age > 0 else -1, worker_age=age,
                            master_pid=int(getattr(self, "ppid", 0) or 0), listen=_listen(getattr(self, "sockets", ())),
                            worker_class=type(self).__name__,
                            threads=int(getattr(getattr(self, "cfg", None), "threads", 1) or 1))
            watch_thread_roles(rec)
        except Exception:  # noqa: BLE001
            pass
        return orig_init(self, *args, **kwargs)

    cls.load_wsgi = load_wsgi
    cls.init_process = init_process


def _gunicorn_sync(rec: Any, module: Any) -> None:
    cls = module.SyncWorker
    orig = cls.handle

    @functools.wraps(orig)
    def handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        _arrivals.value = (_time_ns(), "accepted")
        try:
            return orig(self, *args, **kwargs)
        finally:
            _arrivals.value = None

    cls.handle = handle


def _gunicorn_gthread(rec: Any, module: Any) -> None:
    cls = module.ThreadWorker
    orig_enqueue = cls.enqueue_req
    orig_handle = cls.handle

    @functools.wraps(orig_enqueue)
    def enqueue_req(self: Any, conn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            conn._diag_queued_ns = _time_ns()
        except Exception:  # noqa: BLE001 - a connection class with slots: no queue time
            pass
        return orig_enqueue(self, conn, *args, **kwargs)

    @functools.wraps(orig_handle)
    def handle(self: Any, conn: Any, *args: Any, **kwargs: Any) -> Any:
        queued = getattr(conn, "_diag_queued_ns", 0)
        _arrivals.value = (queued, "queued") if queued else (_time_ns(), "accepted")
        try:
            return orig_handle(self, conn, *args, **kwargs)
        finally:
            _arrivals.value = None

    cls.enqueue_req = enqueue_req
    cls.handle = handle


def _gunicorn_arbiter(rec: Any, module: Any) -> None:
    cls = module.Arbiter
    orig = cls.start

    @functools.wraps(orig)
    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        try:
            server_identity(rec, "gunicorn", "master", worker_index=-1, master_pid=os.getpid(),
                            workers=int(getattr(self, "num_workers", 0) or 0),
                            listen=_listen(getattr(self, "LISTENERS", ())),
                            worker_class=getattr(getattr(self, "worker_class", None), "__name__", ""))
        except Exception:  # noqa: BLE001
            pass
        return out

    cls.start = start


def _flask(rec: Any, module: Any) -> None:
    cls = module.Flask
    orig_call = cls.__call__
    orig_dispatch = cls.full_dispatch_request

    @functools.wraps(orig_call)
    def __call__(self: Any, environ: Any, start_response: Any) -> Any:
        if CURRENT_REQUEST.get() is not None:
            return orig_call(self, environ, start_response)
        server = "werkzeug" if "werkzeug.serving" in sys.modules else ""
        return call_wsgi(rec, functools.partial(orig_call, self), server, environ, start_response)

    @functools.wraps(orig_dispatch)
    def full_dispatch_request(self: Any, *args: Any, **kwargs: Any) -> Any:
        req = CURRENT_REQUEST.get()
        if req is not None and req.source == "wsgi":
            try:
                rule = getattr(sys.modules["flask"].request, "url_rule", None)
                req.route = str(getattr(rule, "rule", "") or "")
            except Exception:  # noqa: BLE001
                pass
        return orig_dispatch(self, *args, **kwargs)

    cls.__call__ = __call__
    cls.full_dispatch_request = full_dispatch_request


# imported submodule -> what patches it (hooks/__init__.py's WATCHED names the same submodules)
INSTALLERS = {
    "gunicorn.workers.base": _gunicorn_worker,
    "gunicorn.workers.sync": _gunicorn_sync,
    "gunicorn.workers.gthread": _gunicorn_gthread,
    "gunicorn.arbiter": _gunicorn_arbiter,
    "flask.app": _flask,
}
