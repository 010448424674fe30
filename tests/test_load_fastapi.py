"""`diag profile --load` on the FastAPI inference server (benchmarks/serving/fastapi_app.py), live on
loopback: overloaded, it is judged queueing, and the client's and the server's tables stand side by
side (console and JSON) with the time before the handler counted.

The server's capacity is fixed by its service time, not by the box: every model call is padded with a
sleep to SERVICE_MS and the batcher takes one request at a time, so it serves 1000 / SERVICE_MS
requests/s however busy the shared 2-core box is (a slower forward only lowers it further). Offered
1.5x that, the queue grows in the batcher's queue, inside the handler. Slow (torch import)."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from diag.cli import main

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
SERVICE_MS = 50.0
CAPACITY = 1000 / SERVICE_MS  # requests/s with a batch of one
RATE = 1.5 * CAPACITY


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_overloaded_fastapi_server_is_queueing_with_both_sides(capsys, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("SERVE_SERVICE_MS", str(SERVICE_MS))
    monkeypatch.setenv("SERVE_MAX_BATCH", "1")
    monkeypatch.setenv("SERVE_VARIANT", "base")
    port = _port()
    out, js = str(tmp_path / "run"), str(tmp_path / "d.json")
    load = (f"http://127.0.0.1:{port}/classify --rate {RATE:g} --arrivals constant --duration 2 --warmup 0.3 "
            "--timeout 10 --body '{\"text\": \"the quick brown fox {i}\"}' -H 'Content-Type: application/json'")
    code = main(["profile", "--out", out, "--no-gpu", "--no-stacks", "--grace", "2", "--json", js,
                 "--load", load, "--load-wait", "90", "--slo", "p99<300ms", "--",
                 sys.executable, "-m", "uvicorn", "--app-dir", str(ROOT), "benchmarks.serving.fastapi_app:app",
                 "--port", str(port), "--log-level", "warning"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    d = json.loads(Path(js).read_text())
    m = d["metrics"]

    # the verdict: the model's thread is the capacity limit and requests queue for it
    assert d["primary"] == "queueing", (d["primary"], d["scores"])
    rules = {f["rule"]: f for f in d["findings"]}
    assert "serve.model_thread_saturated" in rules or "queue.requests_wait" in rules, list(rules)
    assert code == 1 and "load.slo_broken" in rules  # the SLO broke: the load's verdict is the exit code
    assert "the handler is what grew" in rules["load.slo_broken"]["recommendations"][0]["text"]
    # the load it served: all of it answered, latency far past the service time
    assert m["load.error_rate"] == 0 and m["load.offered_per_s"] == pytest.approx(RATE, rel=0.1)
    assert m["load.client_p99_ms"] > 5 * SERVICE_MS

    # both sides, matched request by request, in the JSON ...
    sides = {s["side"]: s for s in d["load"]["sides"]}
    assert {"client", "server", "handler", "pre_handler"} <= set(sides)
    assert m["load.matched_share"] >= 0.95
    assert sides["client"]["count"] >= 30 and sides["server"]["count"] == sides["pre_handler"]["count"]
    assert sides["server"]["count"] >= 0.95 * sides["client"]["count"]
    # ... with the time before the handler counted: here the queue is the batcher's, inside the handler,
    # so the wait before it is small and the client's latency is the server's plus that gap
    assert m["load.pre_handler_p50_ms"] < SERVICE_MS and m["load.pre_handler_share"] < 0.2
    assert "load.wait_before_handler" not in rules
    assert m["load.client_p50_ms"] == pytest.approx(m["load.server_p50_ms"] + m["load.gap_p50_ms"], abs=SERVICE_MS)
    assert m["load.server_p99_ms"] > 5 * SERVICE_MS  # the server's own timing sees this queue

    # ... and in the console, as one table
    lines = err.splitlines()
    rows = {name: next((i for i, line in enumerate(lines) if line.startswith(name)), None)
            for name in ("client latency", "server request time", "handler", "before the handler",
                         "client minus server")}
    assert None not in rows.values(), rows
    assert list(rows.values()) == sorted(rows.values()) and rows["client minus server"] - rows["client latency"] == 4
    assert os.path.isdir(out) and not os.path.exists(os.path.join(out, "load"))
