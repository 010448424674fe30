"""FastAPI server with an asyncio micro-batcher (issue 11's serving shapes).

Run: uvicorn benchmarks.serving.fastapi_app:app --port 8000 [--workers 2]
Environment:
  SERVE_VARIANT  base | tokenize (~12 ms Python per request in the handler) | sleep (time.sleep(20 ms)
                 in the async handler) | read (16 MB uncached read per request) | inline (model
                 called in the handler, no batcher)
  SERVE_MODEL    small (default) | large (the overloaded variant's ~30 requests/s)
  SERVE_SERVICE_MS  each model call lasts at least this long (padded with a sleep): a known service
                 time, so a known capacity (SERVE_MAX_BATCH * 1000 / SERVE_SERVICE_MS requests/s)
  SERVE_MAX_BATCH the batcher's limit (default 16)
  SERVE_ANNOTATE 1: wrap the handler in diag.request() and its parts in diag.stage()
  SERVE_TIMES    a directory: each process appends its handler times there (times.<pid>.txt), timed
                 around the ASGI app as a timing middleware would
The batcher takes up to 16 requests or waits 5 ms, and runs the model through asyncio.to_thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

import torch
from fastapi import FastAPI

from benchmarks.serving.common import Timed, ensure_blob, read_blob
from benchmarks.serving.model import Paced, make_model, tokenize

VARIANT = os.environ.get("SERVE_VARIANT", "base")
ANNOTATE = os.environ.get("SERVE_ANNOTATE") == "1"
MAX_BATCH, MAX_WAIT_S = int(os.environ.get("SERVE_MAX_BATCH", "16")), 0.005
SERVICE_MS = float(os.environ.get("SERVE_SERVICE_MS", "0"))

torch.set_num_threads(1)
model = make_model(os.environ.get("SERVE_MODEL", "small"))
if SERVICE_MS > 0:
    model = Paced(model, SERVICE_MS)
api = FastAPI()
app = Timed(api)
_queue: asyncio.Queue[tuple[list[int], asyncio.Future[int]]] | None = None
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


@api.on_event("startup")
async def _start() -> None:
    global _queue
    _queue = asyncio.Queue()
    asyncio.get_running_loop().create_task(batcher())
    if VARIANT == "read":
        ensure_blob()


def lookup() -> None:
    """A blocking call inside async def: a synchronous database/cache client."""
    time.sleep(0.020)


@api.post("/classify")
async def classify(body: dict[str, Any]) -> dict[str, Any]:
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
    return {"label": label}
