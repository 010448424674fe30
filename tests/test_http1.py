"""diag load's HTTP/1.1 client against a hand-written server: framing, reuse, the pool, failures."""

from __future__ import annotations

import asyncio
import socket

import pytest

from diag.load.client import classify
from diag.load.http1 import HttpClient, HttpFailure, RequestTemplate


def test_request_bytes_built_once_per_url() -> None:
    t = RequestTemplate.build("http://u%40x:p@127.0.0.1:8123/v1/x?a=1", "POST", (("X-Key", "k"),))
    assert (t.host, t.port, t.tls) == ("127.0.0.1", 8123, False)
    data = t.encode(b'{"a":1}')
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/x?a=1 HTTP/1.1"
    assert b"Host: 127.0.0.1:8123" in lines and b"X-Key: k" in lines and b"Content-Length: 7" in lines
    assert b"Authorization: Basic dUB4OnA=" in lines  # user "u@x", password "p" from the URL
    assert body == b'{"a":1}'
    assert RequestTemplate.build("https://h/", "GET").encode(None).endswith(b"User-Agent: diag-load\r\n\r\n")
    assert RequestTemplate.build("https://h/", "GET").port == 443


async def _serve(replies: list[bytes], close_after: bool = False) -> tuple[asyncio.AbstractServer, int, list[int]]:
    """A server that answers the n-th request (on any connection) with replies[n]; returns the connections seen."""
    conns: list[int] = []
    n = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                reply = replies[min(n[0], len(replies) - 1)]
                n[0] += 1
                if reply == b"hang":
                    await asyncio.sleep(1)
                    return
                writer.write(reply)
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], conns


def _run(coro):  # noqa: ANN001, ANN202
    return asyncio.run(coro)


def test_framings_and_keep_alive() -> None:
    replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
               b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
               b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"]

    async def main() -> tuple[list[tuple[int, int]], int]:
        server, port, conns = await _serve(replies)
        async with server:
            c = HttpClient(f"http://127.0.0.1:{port}/", "GET", (), 5.0, 4)
            got = [(await c.request(None))[:2] for _ in range(3)]
            c.close()
            return got, len(conns)

    got, connections = _run(main())
    assert got == [(200, 5), (201, 5), (404, 0)]
    assert connections == 1  # one keep-alive connection carried all three


def test_body_to_the_close_and_connection_close() -> None:
    # No Content-Length, not chunked: the body ends when the server closes; the next request reconnects.
    async def main() -> tuple[list[tuple[int, int]], int]:
        server, port, conns = await _serve([b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-close"],
                                           close_after=True)
        async with server:
            c = HttpClient(f"http://127.0.0.1:{port}/", "POST", (), 5.0, 2)
            got = [(await c.request(b"x"))[:2] for _ in range(2)]
            c.close()
            return got, len(conns)

    got, connections = _run(main())
    assert got == [(200, 11), (200, 11)]
    assert connections == 2


def test_head_reply_has_no_body() -> None:
    async def main() -> tuple[int, int]:
        server, port, _ = await _serve([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"])
        async with server:
            c = HttpClient(f"http://127.0.0.1:{port}/", "HEAD", (), 2.0, 1)
            status, nbytes, _ = await c.request(None)
            c.close()
            return status, nbytes

    assert _run(main()) == (200, 0)


def test_failures_have_their_kind() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]

    async def refused() -> BaseException:
        c = HttpClient(f"http://127.0.0.1:{free}/", "GET", (), 2.0, 1)
        try:
            await c.request(None)
        except Exception as exc:  # noqa: BLE001
            return exc
        raise AssertionError("no failure")

    exc = _run(refused())
    assert isinstance(exc, HttpFailure) and classify(0, exc) == "connect_refused"

    async def server_fails(reply: bytes, timeout: float) -> tuple[str | None, int]:
        good = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        server, port, _ = await _serve([reply, good], close_after=True)
        async with server:
            c = HttpClient(f"http://127.0.0.1:{port}/", "GET", (), timeout, 1)
            try:
                await c.request(None)
                kind = None
            except Exception as exc:  # noqa: BLE001
                kind = classify(0, exc)
            status = (await c.request(None))[0]  # the pool (one connection at most) got its slot back
            c.close()
            return kind, status

    assert _run(server_fails(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", 2.0)) == ("disconnected", 200)
    assert _run(server_fails(b"NOT HTTP AT ALL\r\n\r\n", 2.0)) == ("other", 200)
    assert _run(server_fails(b"hang", 0.2)) == ("timeout", 200)


def test_pool_never_opens_more_than_its_limit() -> None:
    async def main() -> tuple[int, int]:
        server, port, conns = await _serve([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
        async with server:
            c = HttpClient(f"http://127.0.0.1:{port}/", "GET", (), 5.0, 3)
            got = await asyncio.gather(*(c.request(None) for _ in range(40)))
            c.close()
            return sum(1 for g in got if g[0] == 200), len(conns)

    ok, connections = _run(main())
    assert ok == 40 and connections <= 3


@pytest.mark.parametrize("url", ["http://[::1]:9/x", "http://h:81"])
def test_host_header(url: str) -> None:
    t = RequestTemplate.build(url, "GET")
    assert (b"Host: [::1]:9" if "::1" in url else b"Host: h:81") in t.encode(None)
