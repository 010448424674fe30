"""FastAPI server with an asyncio micro-batcher (issue 11's serving shapes).

Run: uvicorn benchmarks.serving.fastapi_app:app --port 8000 [--workers 2]
Environment:
  SERVE_VARIANT  base | tokenize (~12 ms Python per request in the handler) | sleep (time.sleep(20 ms)
                 in the async handler) | read (16 MB uncached read per request) | inline (model
                 called in the handler, no batcher)
  SERVE_MODEL    small (default) | large (the overloaded variant's ~30 requests/s)
  SERVE_ANNOTATE 1: wrap the handler in diag.request() and its parts in diag.stage()
  SERVE_TIMES    a directory: each process writes its own handler times there (times.<pid>.json)
The batcher takes up to 16 requests or waits 5 ms, and runs the model through asyncio.to_thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import time
from typing import Any

import torch
from fastapi import FastAPI

from benchmarks.serving.model import make_model, tokenize

VARIANT = os.environ.get("SERVE_VARIANT", "base")
ANNOTATE = os.environ.get("SERVE_ANNOTATE") == "1"
TIMES_DIR = os.environ.get("SERVE_TIMES", "")
MAX_BATCH, MAX_WAIT_S = 16, 0.005
READ_BYTES = 16 << 20
DATA_FILE = os.environ.get("SERVE_DATA", "/tmp/diag_serving_blob.bin")

torch.set_num_threads(1)
model = make_model(os.environ.get("SERVE_MODEL", "small"))
app = FastAPI()
_queue: asyncio.Queue[tuple[list[int], asyncio.Future[int]]] | None = None
_handler_ms: list[float] = []


def _write_times() -> None:
    if TIMES_DIR:
        with open(os.path.join(TIMES_DIR, f"times.{os.getpid()}.json"), "w") as f:
            json.dump({"pid": os.getpid(), "handler_ms": _handler_ms}, f)


atexit.register(_write_times)


def _request() -> Any:
    if not ANNOTATE:
        return contextlib.nullcontext()
    import diag
    return diag.request()


def _stage(name: str) -> Any:
    if not ANNOTATE:
        return contextlib.nullcontext()
    import diag
    return diag.stage(name)


def run_model(batch: list[list[int]]) -> list[int]:
    with torch.inference_mode():
        return model(torch.tensor(batch)).argmax(dim=1).tolist()


async def batcher() -> None:
    assert _queue is not None
    while True:
        items = [await _queue.get()]
        deadline = time.monotonic() + MAX_WAIT_S
        while len(items) < MAX_BATCH and (left := deadline - time.monotonic()) > 0:
            try:
                items.append(await asyncio.wait_for(_queue.get(), left))
            except asyncio.TimeoutError:
                break
        out = await asyncio.to_thread(run_model, [ids for ids, _ in items])
        for (_, fut), y in zip(items, out, strict=True):
            if not fut.done():
                fut.set_result(y)


@app.on_event("startup")
async def _start() -> None:
    global _queue
    _queue = asyncio.Queue()
    asyncio.get_running_loop().create_task(batcher())
    if VARIANT == "read" and not os.path.exists(DATA_FILE):
        with open(DATA_FILE, "wb") as f:
            f.write(os.urandom(READ_BYTES))


def lookup() -> None:
    """A blocking call inside async def: a synchronous database/cache client."""
    time.sleep(0.020)


def read_blob() -> int:
    """16 MB read with the page cache dropped first: every request goes to disk."""
    fd = os.open(DATA_FILE, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        n = 0
        while chunk := os.read(fd, 1 << 20):
            n += len(chunk)
        return n
    finally:
        os.close(fd)


@app.post("/classify")
async def classify(body: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    with _request():
        text = str(body.get("text", "the quick brown fox"))
        with _stage("tokenize"):
            ids = tokenize(text, heavy_ms=12.0 if VARIANT == "tokenize" else 0.0)
        if VARIANT == "sleep":
            with _stage("lookup"):
                lookup()
        if VARIANT == "read":
            with _stage("read"):
                read_blob()
        with _stage("model"):
            if VARIANT == "inline":
                label = run_model([ids])[0]
            else:
                assert _queue is not None
                fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                await _queue.put((ids, fut))
                label = await fut
    _handler_ms.append((time.perf_counter() - t0) * 1e3)
    return {"label": label}
