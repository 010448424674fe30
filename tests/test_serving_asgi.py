"""FastAPI under uvicorn, profiled with no code change: requests, arrival, loop lag, roles, identity."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from serving_support import Served, details, free_port, get, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

APP = """
import asyncio, time
from fastapi import FastAPI, Request

app = FastAPI()
TIMES = []

@app.get("/items/{item_id}")
async def item(item_id: int):
    t = time.perf_counter()
    await asyncio.sleep(0.08)
    await asyncio.to_thread(time.sleep, 0.02)
    TIMES.append(time.perf_counter() - t)
    return {"id": item_id}

@app.post("/echo")
async def echo(request: Request):
    return {"n": len(await request.body())}

@app.get("/block")
async def block():
    time.sleep(0.4)  # a blocking call inside async def: holds the event loop
    return {}

@app.get("/times")
def times():
    return TIMES
"""


@pytest.mark.slow
def test_fastapi_under_uvicorn(tmp_path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    served = Served(tmp_path, APP, [sys.executable, "-m", "uvicorn", "app:app", "--port", str(port)])
    try:
        wait_ready(base + "/times", served.proc)
        with ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(lambda i: get(f"{base}/items/{i}")[0], range(16)))
        assert codes == [200] * 16
        assert get(base + "/echo", b"x" * 1000)[0] == 200
        assert get(base + "/block")[0] == 200
        assert get(base + "/nowhere")[0] == 404
        server_times = json.loads(get(base + "/times")[1])
    finally:
        run = served.stop()
    req = run.table("requests")
    assert set(req["source"]) == {"asgi"} and set(req["server"]) == {"uvicorn"}
    items = req[req["route"] == "/items/{item_id}"]  # the template, never /items/3
    assert len(items) == 16 and set(items["status"]) == {200} and set(items["method"]) == {"GET"}
    assert set(items["arrival"]) == {"parsed"} and (items["wait_ns"] >= 0).all()
    # The handler time diag saw agrees with the server's own within 5% (median and p90).
    ours = items["handler_ns"].sort_values().to_numpy() / 1e9
    theirs = sorted(server_times)
    for q in (0.5, 0.9):
        a, b = ours[int(q * (len(ours) - 1))], theirs[int(q * (len(theirs) - 1))]
        assert abs(a - b) / b < 0.05, (q, a, b)
    echo = req[req["route"] == "/echo"].iloc[0]
    assert echo["req_bytes"] == 1000 and echo["method"] == "POST" and echo["resp_bytes"] == len('{"n":1000}')
    assert list(req[req["status"] == 404]["route"]) == [""]  # no route matched: no raw path either
    assert req["task"].str.startswith("Task-").all()
    assert len(set(req["tid"])) == 1  # all on the event-loop thread
    # The event loop: its probe saw the 0.4 s block, on that thread; the to_thread workers have their role.
    lag = run.table("loop_lag")
    assert set(lag["tid"]) == set(req["tid"]) and lag["lag_ns"].max() > 0.25e9
    roles = {(r["name"], r["tid"]) for r in details(run.table("events"), "thread_role")}
    assert ("event_loop", int(req["tid"].iloc[0])) in roles
    assert any(name == "loop_executor" for name, _ in roles)
    (server,) = details(run.table("events"), "server")
    assert server["role"] == "single" and server["listen"] == [f"127.0.0.1:{port}"]


def test_every_watched_server_module_has_an_installer_and_back() -> None:
    from diag.collect.hooks import WATCHED, asgi, wsgi

    for hooks_module, mod in ((".asgi", asgi), (".wsgi", wsgi)):
        watched = {name for name, (hooks_name, _, _) in WATCHED.items() if hooks_name == hooks_module}
        assert watched == set(mod.INSTALLERS)
