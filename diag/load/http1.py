"""A lean HTTP/1.1 client for `diag load`: one URL, keep-alive connections, httptools' C parser.

Why not aiohttp (the first choice): at low load its Python per request (building
the request, its response objects) added 0.4-0.7 ms to every latency on a 2-core
box, and the load's latencies must agree with the server's own timing within
1 ms (docs/serving.md). A load hits one URL with a few fixed headers, so the
request's bytes are built once (`RequestTemplate`) and each reply is only parsed
for its status, its body length and whether the connection may be reused.

What it does: http and https (the standard `ssl` module), a pool of at most
`max_connections` keep-alive connections, a total timeout per request
(connecting, waiting for a free connection, sending and reading), bodies sent
with Content-Length, replies with Content-Length, chunked or read to the close.
What it does not: follow redirects (the caller counts them), decompress (no
Accept-Encoding is sent unless the user adds one; `nbytes` is what came on the
wire), cookies, proxies.

Failures are `HttpFailure` with a `kind` the load's error counts use:
`connect_refused`, `connect_error`, `disconnected`, `other`; a timeout is
`asyncio.TimeoutError`.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import ssl
import time
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import httptools

USER_AGENT = "diag-load"


class HttpFailure(Exception):
    """A request that got no complete reply; `kind` is its error count's name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class RequestTemplate:
    """The request's bytes up to its body, built once; `encode(body)` adds the length and the body."""

    host: str
    port: int
    tls: bool
    head: bytes  # request line and headers, without Content-Length and the blank line
    method: str

    @classmethod
    def build(cls, url: str, method: str, headers: tuple[tuple[str, str], ...] = ()) -> RequestTemplate:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or ""
        port = parts.port or (443 if tls else 80)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            host_header += f":{parts.port}"
        given = {k.lower() for k, _ in headers}
        lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
        if "host" not in given:
            lines.insert(1, f"Host: {host_header}")
        if "user-agent" not in given:
            lines.append(f"User-Agent: {USER_AGENT}")
        if parts.username is not None and "authorization" not in given:  # credentials in the URL: Basic auth
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            lines.append("Authorization: Basic " + base64.b64encode(pair).decode())
        head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        return cls(host=host, port=port, tls=tls, head=head, method=method)

    def encode(self, body: bytes | None) -> bytes:
        if body is None:
            if self.method in ("GET", "HEAD", "DELETE", "OPTIONS"):
                return self.head + b"\r\n"
            body = b""
        return b"%sContent-Length: %d\r\n\r\n%s" % (self.head, len(body), body)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time (no pipelining)."""

    def __init__(self, head_request: bool) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.head_request = head_request  # a reply to HEAD has no body, whatever its headers say
        self._reply: asyncio.Future[tuple[int, int, int]] | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._status = 0
        self._nbytes = 0
        self._headers_done = False
        self._framed = False  # the reply says where its body ends (Content-Length or chunked)
        self.reusable = False

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._parser is None:
            self._fail(HttpFailure("other", "the server sent data before any request"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpFailure("other", f"bad HTTP reply: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        reply = self._reply
        if reply is None or reply.done():
            return
        if self._headers_done and not self._framed:  # a body that ends at the close: complete
            self._done(False)
        else:
            reply.set_exception(HttpFailure("disconnected", "the server closed the connection before replying"
                                            + (f": {exc}" if exc else "")))

    # -- httptools callbacks ---------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        if lower == b"content-length" or (lower == b"transfer-encoding" and b"chunked" in value.lower()):
            self._framed = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()  # type: ignore[union-attr]
        if self.head_request:
            self._done(False)  # the parser would wait for a body HEAD never gets: this connection ends here

    def on_body(self, body: bytes) -> None:
        self._nbytes += len(body)

    def on_message_complete(self) -> None:
        if self._reply is not None and not self._reply.done():
            self._done(bool(self._parser and self._parser.should_keep_alive()))

    # -- the request -----------------------------------------------------------------------

    def send(self, data: bytes, reply: asyncio.Future[tuple[int, int, int]]) -> None:
        """Write one request; `reply` gets (status, body bytes, perf_counter_ns at the reply's end)."""
        self._reply = reply
        self._parser = httptools.HttpResponseParser(self)
        self._status = self._nbytes = 0
        self._headers_done = self._framed = self.reusable = False
        assert self.transport is not None
        self.transport.write(data)

    def _done(self, keep_alive: bool) -> None:
        end_ns = time.perf_counter_ns()  # the reply is in: the task's own wake-up is not its latency
        self.reusable = keep_alive and not self.closed and not self.head_request
        if self._reply is not None and not self._reply.done():
            self._reply.set_result((self._status, self._nbytes, end_ns))

    def _fail(self, failure: HttpFailure) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(failure)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class HttpClient:
    """Requests to one URL over a pool of at most `max_connections` keep-alive connections."""

    def __init__(self, url: str, method: str, headers: tuple[tuple[str, str], ...], timeout: float,
                 max_connections: int) -> None:
        self.template = RequestTemplate.build(url, method, headers)
        self.timeout = timeout
        self.max_connections = max(1, max_connections)
        self._idle: collections.deque[_Connection] = collections.deque()
        self._open = 0  # connections open or being opened
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._ssl = ssl.create_default_context() if self.template.tls else None

    async def request(self, body: bytes | None) -> tuple[int, int, int]:
        """(status, body bytes, perf_counter_ns when the reply ended); HttpFailure or asyncio.TimeoutError."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        conn = self._idle_connection()
        if conn is None:
            conn = await asyncio.wait_for(self._new_connection(), self.timeout)
        reply: asyncio.Future[tuple[int, int, int]] = loop.create_future()
        try:
            conn.send(self.template.encode(body), reply)
            out = await asyncio.wait_for(reply, max(0.0, deadline - loop.time()))
        except BaseException:
            conn.close()  # unknown state: never reused
            self._release(conn)
            raise
        self._release(conn)
        return out

    def _idle_connection(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()  # the most recent: the least likely to have been closed by the server
            if not conn.closed:
                return conn
            self._open -= 1
        return None

    async def _new_connection(self) -> _Connection:
        while self._open >= self.max_connections:  # wait for a connection to come back or close
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            conn = self._idle_connection()
            if conn is not None:
                return conn
        self._open += 1
        t = self.template
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                lambda: _Connection(t.method == "HEAD"), t.host, t.port, ssl=self._ssl,
                server_hostname=t.host if self._ssl else None)
        except BaseException as exc:
            self._open -= 1
            self._wake()
            if isinstance(exc, ConnectionRefusedError):
                raise HttpFailure("connect_refused", f"connection refused: {t.host}:{t.port}") from None
            if isinstance(exc, OSError):
                raise HttpFailure("connect_error", f"cannot connect to {t.host}:{t.port}: {exc}") from None
            raise
        return conn

    def _release(self, conn: _Connection) -> None:
        if conn.reusable and not conn.closed:
            self._idle.append(conn)
        else:
            conn.close()
            self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
            self._open -= 1
