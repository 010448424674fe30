"""A real HTTP server for the load tests: a bare ASGI app under uvicorn, run as a subprocess.

`python tests/load_server.py PORT CAP`: every request waits for one of CAP slots (an
asyncio.Semaphore), then is served in a known time:
- /fixed: 50 ms
- /spread: 100-300 ms, uniform (a low-discrepancy sequence, so any run of requests
  covers the range evenly: the q-th percentile is 100 + 2 q ms, whatever the count)
- /status/NNN: answers NNN at once; /redirect: 302 to /fixed; /hang: 30 s
- /die: the 30th request kills the server (a crash mid-load)
A client that gives up (timeout) frees its slot: the work is cancelled on disconnect.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import uvicorn

GOLDEN = 0.6180339887498949
state = {"n": 0}
slots: asyncio.Semaphore | None = None


async def _serve(path: str) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    assert slots is not None
    if path.startswith("/status/"):
        return int(path.rsplit("/", 1)[1]), b"x", []
    if path == "/redirect":
        return 302, b"", [(b"location", b"/fixed")]
    state["n"] += 1
    t0 = time.perf_counter()
    if path == "/die" and state["n"] >= 30:
        os._exit(1)
    async with slots:
        if path == "/spread":
            await asyncio.sleep(0.100 + 0.200 * ((state["n"] * GOLDEN) % 1.0))
        elif path == "/hang":
            await asyncio.sleep(30)
        else:
            await asyncio.sleep(0.050)
    # the server's own timing of the request, for the client's figures to be checked against
    return 200, b"ok", [(b"server-timing", f"app;dur={(time.perf_counter() - t0) * 1e3:.3f}".encode())]


async def _disconnect(receive) -> None:  # noqa: ANN001
    while (await receive())["type"] != "http.disconnect":
        pass


async def app(scope, receive, send) -> None:  # noqa: ANN001
    global slots
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                slots = asyncio.Semaphore(int(sys.argv[2]))
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    while True:  # the whole request body first
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return
        if not msg.get("more_body"):
            break
    work = asyncio.ensure_future(_serve(scope["path"]))
    gone = asyncio.ensure_future(_disconnect(receive))
    await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    gone.cancel()
    if not work.done():
        work.cancel()
        return
    status, body, headers = work.result()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="on",
                backlog=2048, timeout_keep_alive=30)
