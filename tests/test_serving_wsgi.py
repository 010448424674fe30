"""Flask under gunicorn (sync and threaded workers), profiled with no code change."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from serving_support import Served, details, free_port, get, wait_ready

pytest.importorskip("flask")
pytest.importorskip("gunicorn")

APP = """
import time
from flask import Flask, g, request

app = Flask(__name__)

@app.before_request
def started():
    g.t0 = time.perf_counter()

@app.after_request
def timed(response):  # the server's own handler time, sent back to the client
    response.headers["X-Elapsed"] = str(time.perf_counter() - g.t0)
    return response

@app.get("/items/<int:item_id>")
def item(item_id):
    time.sleep(0.1)
    return {"id": item_id}

@app.post("/echo")
def echo():
    return {"n": len(request.get_data())}
"""


@pytest.mark.slow
@pytest.mark.parametrize("worker", ["sync", "gthread"])
def test_flask_under_gunicorn(tmp_path, worker) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    threads = ["--threads", "2"] if worker == "gthread" else []  # gunicorn makes sync with threads gthread
    served = Served(tmp_path, APP, [sys.executable, "-m", "gunicorn", "-w", "2", "-k", worker, *threads,
                                    "-b", f"127.0.0.1:{port}", "app:app"])
    try:
        wait_ready(base + "/echo", served.proc)
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda i: get(f"{base}/items/{i}"), range(12)))
        assert [a[0] for a in answers] == [200] * 12
        status, echoed, _ = get(base + "/echo", b"y" * 300)
        assert status == 200
    finally:
        run = served.stop()
    server_times = sorted(float(a[2]["X-Elapsed"]) for a in answers)
    req = run.table("requests")
    assert set(req["source"]) == {"wsgi"} and set(req["server"]) == {"gunicorn"}
    items = req[req["route"] == "/items/<int:item_id>"]
    assert len(items) == 12 and set(items["status"]) == {200}
    assert set(items["arrival"]) == {"accepted" if worker == "sync" else "queued"}
    ours = items["handler_ns"].sort_values().to_numpy() / 1e9
    for q in (0.5, 0.9):
        a, b = ours[int(q * (len(ours) - 1))], server_times[int(q * (len(server_times) - 1))]
        assert abs(a - b) / b < 0.05, (q, a, b)
    assert (items["dur_ns"] >= items["handler_ns"]).all()
    echo = req[req["route"] == "/echo"]
    assert int(echo["req_bytes"].max()) == 300 and int(echo["resp_bytes"].max()) == len(echoed)
    # Every process knows what it is: one master, two workers of it, all on the same socket.
    servers = details(run.table("events"), "server")
    (master,) = [s for s in servers if s["role"] == "master"]
    workers = [s for s in servers if s["role"] == "worker"]
    assert len(workers) >= 2 and {w["master_pid"] for w in workers} == {master["pid"]}
    assert sorted(w["worker_index"] for w in workers)[:2] == [0, 1]
    assert {tuple(s["listen"]) for s in servers} == {(f"127.0.0.1:{port}",)}
    assert set(req["pid"]) <= {w["pid"] for w in workers}
    roles = details(run.table("events"), "thread_role")
    assert {(r["pid"], r["tid"]) for r in roles if r["name"] == "request_thread"} == set(zip(req["pid"], req["tid"], strict=True))
