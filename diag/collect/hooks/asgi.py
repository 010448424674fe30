"""ASGI requests, found with no code change (FastAPI/Starlette under uvicorn or any server).

Like OpenTelemetry's ASGI instrumentation, each HTTP request is seen by
wrapping the ASGI app the server calls, and its `send`/`receive`: status,
body sizes, response start and end. Installed lazily when the target imports
the modules below (hooks/__init__.py, WATCHED):

- `uvicorn.config`: `Config.load` wraps the loaded app, outermost (middleware
  included), whatever the app is.
- `uvicorn.protocols.http.*_impl`: `RequestResponseCycle.__init__` runs when
  uvicorn has parsed a request's headers, before the app's task is scheduled:
  the request's arrival (`arrival` = `parsed`), so time spent waiting for a
  busy event loop is seen.
- `uvicorn.server`: `Server.startup` records the process's `server` event
  (role, listening sockets) and starts the loop lag probe (loop_lag.py).
- `uvicorn.supervisors.multiprocess`: `Multiprocess.init_processes` records
  the master's `server` event with its workers' pids in index order.
- `starlette.applications`: `Starlette.__call__`, for servers not hooked above
  (hypercorn, granian...); a request already open in the context (the uvicorn
  wrapper, a mounted sub-app) is not opened twice.

Lifespan and websocket scopes pass through untouched: they are not requests.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import sys
import time
from typing import Any

from ..request_context import CURRENT_REQUEST, Request, server_identity, watch_thread_roles
from .loop_lag import ensure_probe

_time_ns = time.time_ns

# id(scope) -> (arrival ns, scope): set when uvicorn parsed the request, taken by the app
# wrapper. The scope is held so its id cannot be reused meanwhile; bounded.
_ARRIVALS: dict[int, tuple[int, Any]] = {}
_MAX_ARRIVALS = 10_000

SERVERS = ("uvicorn", "hypercorn", "granian", "daphne")


def _server_name() -> str:
    for name in SERVERS:
        if name in sys.modules:
            return name
    return ""


def _route(scope: dict[str, Any]) -> str:
    """The route template (`/items/{item_id}`), never the raw path; "" when no router matched."""
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    if isinstance(template, str):
        return template
    params = scope.get("path_params")
    path = scope.get("path")
    if params and isinstance(params, dict) and isinstance(path, str):
        # A router that sets path_params but not the route: put the names back in the path.
        values = {str(v): k for k, v in params.items()}
        return "/".join("{" + values[seg] + "}" if seg in values else seg for seg in path.split("/"))
    return ""


def _content_length(scope: dict[str, Any]) -> int:
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return -1
    return -1


async def serve_http(rec: Any, app: Any, server: str, scope: dict[str, Any], receive: Any, send: Any) -> Any:
    """Call `app` for one HTTP request and write its `requests` row."""
    entry = _ARRIVALS.pop(id(scope), None)
    arrival = entry[0] if entry is not None and entry[1] is scope else 0
    req = Request("asgi", server, rec.tid(), arrival, "parsed")
    req.method = str(scope.get("method") or "")
    declared = _content_length(scope)
    received = 0
    try:
        asyncio = sys.modules["asyncio"]
        task = asyncio.current_task()
        req.task = task.get_name() if task is not None else ""
    except Exception:  # noqa: BLE001 - not asyncio (trio): no task name
        pass
    ensure_probe(rec)

    async def receive_counted() -> Any:
        nonlocal received
        message = await receive()
        if message.get("type") == "http.request":
            received += len(message.get("body") or b"")
        return message

    async def send_seen(message: Any) -> Any:
        kind = message.get("type")
        if kind == "http.response.start":
            req.status = int(message.get("status") or 0)
            req.resp_start_ns = _time_ns()
        elif kind == "http.response.body":
            req.resp_bytes += len(message.get("body") or b"")
            if not message.get("more_body"):
                req.handler_end_ns = _time_ns()  # response complete: background tasks may still run
        return await send(message)

    token = CURRENT_REQUEST.set(req)
    try:
        return await app(scope, receive_counted, send_seen)
    except BaseException as exc:
        req.error = type(exc).__name__
        if not req.status:
            req.status = 500  # what the server answers for an app that raised before responding
        raise
    finally:
        returned = _time_ns()
        complete = req.handler_end_ns or returned
        req.handler_end_ns = returned
        CURRENT_REQUEST.reset(token)
        req.req_bytes = declared if declared >= 0 else received
        try:
            req.route = _route(scope)
        except Exception:  # noqa: BLE001
            pass
        req.finish(rec, complete)


class AsgiApp:
    """An ASGI app wrapped so that each HTTP request it serves is recorded."""

    def __init__(self, app: Any, rec: Any, server: str) -> None:
        self.app = app
        self._rec = rec
        self._server = server

    def __getattr__(self, name: str) -> Any:  # the server may look at the app's attributes
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        if scope.get("type") != "http" or CURRENT_REQUEST.get() is not None:
            return await self.app(scope, receive, send)
        return await serve_http(self._rec, self.app, self._server, scope, receive, send)


def wrap_app(app: Any, rec: Any, server: str) -> Any:
    """`app`, wrapped once (a wrapped app is returned as is)."""
    return app if isinstance(app, AsgiApp) else AsgiApp(app, rec, server)


# -- installers, one per watched module ----------------------------------------------

def _uvicorn_config(rec: Any, module: Any) -> None:
    orig = module.Config.load

    @functools.wraps(orig)
    def load(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        try:
            self.loaded_app = wrap_app(self.loaded_app, rec, "uvicorn")
        except Exception as exc:  # noqa: BLE001
            rec.note("hooks.asgi", f"uvicorn app not wrapped: {exc!r}")
        return out

    module.Config.load = load


def _uvicorn_cycle(rec: Any, module: Any) -> None:
    cls = getattr(module, "RequestResponseCycle", None)
    if cls is None:
        rec.note("hooks.asgi", f"{module.__name__} has no RequestResponseCycle: arrival is the app call")
        return
    orig = cls.__init__

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        scope = kwargs.get("scope", args[0] if args else None)
        if type(scope) is dict:
            if len(_ARRIVALS) >= _MAX_ARRIVALS:
                _ARRIVALS.clear()
            _ARRIVALS[id(scope)] = (_time_ns(), scope)
        orig(self, *args, **kwargs)

    cls.__init__ = __init__


def _listen(sockets: Any) -> list[str]:
    out = []
    for sock in sockets or ():
        try:
            name = sock.getsockname()
            out.append(f"{name[0]}:{name[1]}" if isinstance(name, tuple) else str(name))
        except Exception:  # noqa: BLE001
            pass
    return out


def _uvicorn_server(rec: Any, module: Any) -> None:
    orig = module.Server.startup

    @functools.wraps(orig)
    async def startup(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = await orig(self, *args, **kwargs)
        try:
            sockets = [s for srv in getattr(self, "servers", None) or () for s in (getattr(srv, "sockets", None) or ())]
            workers = int(getattr(self.config, "workers", None) or 1)
            parent = multiprocessing.parent_process()
            role = "worker" if parent is not None else "single"
            server_identity(rec, "uvicorn", role, listen=_listen(sockets), workers=workers,
                            master_pid=parent.pid if parent is not None else 0, worker_index=-1)
            watch_thread_roles(rec)
            ensure_probe(rec)
        except Exception:  # noqa: BLE001
            pass
        return out

    module.Server.startup = startup


def _uvicorn_multiprocess(rec: Any, module: Any) -> None:
    orig = module.Multiprocess.init_processes

    @functools.wraps(orig)
    def init_processes(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        try:
            pids = [int(p.pid or 0) for p in getattr(self, "processes", ())]
            server_identity(rec, "uvicorn", "master", listen=_listen(getattr(self, "sockets", ())),
                            workers=len(pids), worker_pids=pids, master_pid=os.getpid(), worker_index=-1)
        except Exception:  # noqa: BLE001
            pass
        return out

    module.Multiprocess.init_processes = init_processes


def _starlette(rec: Any, module: Any) -> None:
    cls = module.Starlette
    orig = cls.__call__

    @functools.wraps(orig)
    async def __call__(self: Any, scope: Any, receive: Any, send: Any) -> Any:
        if scope.get("type") != "http" or CURRENT_REQUEST.get() is not None:
            return await orig(self, scope, receive, send)
        return await serve_http(rec, functools.partial(orig, self), _server_name(), scope, receive, send)

    cls.__call__ = __call__


# imported submodule -> what patches it (hooks/__init__.py's WATCHED names the same submodules)
INSTALLERS = {
    "uvicorn.config": _uvicorn_config,
    "uvicorn.server": _uvicorn_server,
    "uvicorn.supervisors.multiprocess": _uvicorn_multiprocess,
    "uvicorn.protocols.http.h11_impl": _uvicorn_cycle,
    "uvicorn.protocols.http.httptools_impl": _uvicorn_cycle,
    "uvicorn.protocols.http.zttp_impl": _uvicorn_cycle,
    "uvicorn.protocols.http.zttp_h2_impl": _uvicorn_cycle,
    "starlette.applications": _starlette,
}
