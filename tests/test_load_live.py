"""diag load against a real uvicorn server on loopback (tests/load_server.py) with known service
times and a known concurrency cap: percentiles, capacity, and every kind of server failure."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from diag.cli import main
from diag.store.run import open_run

pytestmark = pytest.mark.slow
SERVER = os.path.join(os.path.dirname(__file__), "load_server.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cap: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, SERVER, str(port), str(cap)])
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("test server did not start")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc, url = _start(cap=4)
    yield url
    proc.terminate()
    proc.wait(5)


def _load(capsys: pytest.CaptureFixture[str], tmp_path, *argv: str) -> tuple[int, dict, str]:  # noqa: ANN001
    out = str(tmp_path / "run")
    code = main(["load", *argv, "--out", out, "--json"])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return code, json.loads(cap.out), cap.err


def test_percentiles_match_the_known_service_time(server: str, capsys, tmp_path) -> None:  # noqa: ANN001
    # 4 requests in flight under a cap of 4: no queueing, latency is the service time, uniform 100-300 ms
    # (long enough that a busy shared box's few ms of client overhead stay inside 5%)
    code, res, _ = _load(capsys, tmp_path, f"{server}/spread", "--concurrency", "4", "--duration", "3",
                         "--warmup", "0.3", "--slo", "p99<400ms", "--slo", "errors<1%")
    st = res["stats"]
    assert res["schema"] == "diag.load/1" and code == 0 and res["slo_held"] is True
    for q in (50, 90, 95, 99):
        assert st[f"p{q}_ms"] == pytest.approx(100 + 2 * q, rel=0.05), q
    assert st["errors"] == 0 and st["throughput_per_s"] == pytest.approx(4 / 0.2, rel=0.1)
    run = open_run(res["run_dir"])
    reqs = run.table("load_requests")
    assert len(reqs) >= st["requests"] and set(reqs["phase"]) == {"warmup", "measure"}
    assert run.manifest["load"]["stats"]["p50_ms"] == st["p50_ms"]


def test_open_loop_counts_the_queue_it_causes(server: str, capsys, tmp_path) -> None:  # noqa: ANN001
    # 120/s against a capacity of 80/s (cap 4, 50 ms): a closed loop would hide the queue; the open loop
    # times requests from their due time, so latency grows far past the service time
    code, res, _ = _load(capsys, tmp_path, f"{server}/fixed", "--rate", "120", "--arrivals", "constant",
                         "--duration", "1.5", "--warmup", "0", "--timeout", "5", "--slo", "p99<100ms")
    st = res["stats"]
    assert code == 1 and res["slo_held"] is False
    assert st["p99_ms"] > 300 and st["send_lag_p99_ms"] < 50  # the wait is the server's, not the sender's


def test_low_rate_sends_are_on_time(server: str, capsys, tmp_path) -> None:  # noqa: ANN001
    # arrivals 50 ms apart: each request's task yield-waits its due time and sends within microseconds
    # of it, not a timer wake-up (~1-1.5 ms) late; a late send is latency the server never caused
    code, res, _ = _load(capsys, tmp_path, f"{server}/status/200", "--rate", "20", "--arrivals", "constant",
                         "--duration", "2", "--warmup", "0")
    reqs = open_run(res["run_dir"]).table("load_requests")
    lag_ms = (reqs["sent_ns"] - reqs["ts_ns"]) / 1e6
    assert code == 0 and len(reqs) == 40 and lag_ms.median() < 0.5, lag_ms.describe()


def test_sweep_finds_the_known_capacity(server: str, capsys, tmp_path) -> None:  # noqa: ANN001
    code, res, _ = _load(capsys, tmp_path, f"{server}/fixed", "--sweep", "--rate", "40", "--arrivals", "constant",
                         "--duration", "1.5", "--warmup", "0.3", "--timeout", "1", "--sweep-refine", "3",
                         "--slo", "p99<100ms")
    sw = res["sweep"]
    assert sw["best_level"] == pytest.approx(80, rel=0.10), [(s["level"], s["p99_ms"]) for s in sw["steps"]]
    assert sw["knee_level"] is not None
    table = open_run(res["run_dir"]).table("load_sweep")
    assert len(table) == len(sw["steps"]) and {"level", "p99_ms", "held"} <= set(table.columns)


@pytest.mark.parametrize(("path", "kind"), [("/status/503", "http_5xx"), ("/status/404", "http_4xx"),
                                             ("/redirect", "redirect")])
def test_error_storms_are_counted(server: str, capsys, tmp_path, path: str, kind: str) -> None:  # noqa: ANN001
    code, res, err = _load(capsys, tmp_path, server + path, "--rate", "50", "--duration", "0.5", "--warmup", "0")
    st = res["stats"]
    assert code == 1 and st["ok"] == 0 and st["errors_by_kind"][kind] == st["requests"] > 0
    assert err.count("\n") == 1 and "no request succeeded" in err
    statuses = set(open_run(res["run_dir"]).table("load_requests")["status"])
    assert statuses == {int(path.rsplit("/", 1)[1]) if "status" in path else 302}  # the redirect was not followed


def test_timeouts(server: str, capsys, tmp_path) -> None:  # noqa: ANN001
    code, res, _ = _load(capsys, tmp_path, f"{server}/hang", "--rate", "10", "--duration", "0.5", "--warmup", "0",
                         "--timeout", "0.3")
    assert code == 1 and res["stats"]["errors_by_kind"]["timeout"] == res["stats"]["requests"] > 0


def test_connection_refused_stops_early_and_keeps_the_run(capsys, tmp_path) -> None:  # noqa: ANN001
    url = f"http://127.0.0.1:{_free_port()}/"
    t0 = time.monotonic()
    code, res, err = _load(capsys, tmp_path, url, "--rate", "200", "--duration", "20", "--warmup", "0")
    assert code == 1 and time.monotonic() - t0 < 10
    assert res["stats"]["errors_by_kind"]["connect_refused"] > 0 and "could not connect" in res["stopped"]
    assert err.count("\n") == 1 and err.startswith("diag: stopped early")
    assert os.path.isfile(os.path.join(res["run_dir"], "load_requests.parquet"))


def test_server_crash_mid_load(capsys, tmp_path) -> None:  # noqa: ANN001
    proc, url = _start(cap=4)  # /die: the 30th request kills it
    try:
        code, res, err = _load(capsys, tmp_path, f"{url}/die", "--rate", "100", "--duration", "3", "--warmup", "0")
    finally:
        proc.kill()
        proc.wait(5)
    st = res["stats"]
    assert code == 1 and 20 <= st["ok"] < 30
    assert st["errors_by_kind"]["connect_refused"] + st["errors_by_kind"]["disconnected"] > 0
    assert err.count("\n") == 1 and "Traceback" not in err
    assert len(open_run(res["run_dir"]).table("load_requests")) == st["requests"]


def test_secret_header_values_are_never_stored(server: str, capsys, tmp_path) -> None:  # noqa: ANN001
    code, res, _ = _load(capsys, tmp_path, f"{server}/fixed", "--rate", "20", "--duration", "0.3", "--warmup", "0",
                         "--header", "Authorization: Bearer sekrit-value", "-H", "X-Api-Key: other-sekrit")
    assert code == 0
    for root, _, files in os.walk(res["run_dir"]):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                assert b"sekrit" not in fh.read(), f
