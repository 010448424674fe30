"""`diag profile --load` live on loopback: a server with a known service time under diag, the load
driven into the same run, client and server percentiles side by side, the wait before the handler
and the queueing verdict when overloaded, SLOs judged, a URL that never answers; and a load-only run
(`diag load --sweep`) that `diag analyze` speaks of. Short (a few seconds each) and marked slow."""

from __future__ import annotations

import json
import os
import socket
import sys

import pytest

from diag.cli import main
from diag.store.run import open_run

pytestmark = pytest.mark.slow
HERE = os.path.dirname(__file__)
UVICORN_SERVER = os.path.join(HERE, "load_server.py")  # /fixed: 50 ms under a cap (asyncio semaphore)
SERVICE_MS = 50.0


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _profile(capsys, tmp_path, load: str, cmd: list[str], *extra: str) -> tuple[int, dict, str, str]:  # noqa: ANN001
    out, js = str(tmp_path / "run"), str(tmp_path / "d.json")
    code = main(["profile", "--out", out, "--no-gpu", "--no-stacks", "--grace", "2", "--json", js, "--load", load,
                 *extra, "--", *cmd])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    d = json.load(open(js)) if os.path.exists(js) else {}
    return code, d, err, out


def test_client_and_server_side_by_side_at_low_load(capsys, tmp_path) -> None:  # noqa: ANN001
    port = _port()
    code, d, err, out = _profile(
        capsys, tmp_path, f"http://127.0.0.1:{port}/fixed --rate 20 --duration 2 --warmup 0.5",
        [sys.executable, UVICORN_SERVER, str(port), "4"], "--slo", "p99<150ms", "--slo", "errors<1%")
    assert code == 0, err
    m = d["metrics"]
    # the server's own time of each request is the known service time; the client adds little at 20/s
    assert m["load.server_p50_ms"] == pytest.approx(SERVICE_MS, rel=0.05)
    assert m["load.handler_p50_ms"] == pytest.approx(SERVICE_MS, rel=0.05)
    assert m["load.client_p50_ms"] == pytest.approx(SERVICE_MS, rel=0.15)
    assert m["load.matched_share"] >= 0.95 and m["load.pre_handler_p50_ms"] < 10
    sides = {s["side"]: s for s in d["load"]["sides"]}
    assert {"client", "server", "handler", "pre_handler"} <= set(sides)
    assert sides["server"]["count"] == sides["client"]["count"] >= 25
    rules = [f["rule"] for f in d["findings"]]
    assert "load.slo_held" in rules and "load.slo_broken" not in rules and d["primary"] != "queueing"
    # one run holds both sides: the client's rows beside the server's requests
    run = open_run(out)
    assert len(run.table("load_requests")) >= 30 and len(run.table("requests")) >= 30
    assert run.manifest["collectors"]["load"]["status"] == "ok" and run.manifest["load"]["slo_held"] is True
    assert not os.path.exists(os.path.join(out, "load"))  # the load's own run folded into the server's
    assert "client latency" in err and "server request time" in err  # the console table


def test_overloaded_server_queues_before_the_handler(capsys, tmp_path) -> None:  # noqa: ANN001
    # one sync gunicorn worker, 50 ms a request: 20/s at most; 30/s offered queue in the listen
    # backlog, before any handler runs, where only the client sees them
    port = _port()
    code, d, err, _ = _profile(
        capsys, tmp_path, f"http://127.0.0.1:{port}/ --rate 30 --arrivals constant --duration 2 --warmup 0.3 "
        "--timeout 5 --slo p99<200ms",
        [sys.executable, "-m", "gunicorn", "-w", "1", "-b", f"127.0.0.1:{port}", "--log-level", "warning",
         "--chdir", HERE, "profile_load_wsgi:app"])
    m = d["metrics"]
    assert m["load.handler_p50_ms"] == pytest.approx(SERVICE_MS, rel=0.05)
    assert m["load.server_p99_ms"] < 2 * SERVICE_MS  # the server sees nothing wrong...
    assert m["load.client_p99_ms"] > 8 * SERVICE_MS  # ...the client does: the gap
    assert m["load.pre_handler_p50_ms"] > 3 * SERVICE_MS and m["load.tail_pre_handler_share"] > 0.8
    assert d["primary"] == "queueing"
    by = {f["rule"]: f for f in d["findings"]}
    assert "load.wait_before_handler" in by
    broken = by["load.slo_broken"]
    assert "before the handler is what grew" in broken["recommendations"][0]["text"]
    assert "queueing" in broken["recommendations"][0]["text"]
    assert code == 1  # an SLO broke: diag stopped the server, the load's verdict is the exit code


def test_url_that_never_answers_stops_the_server_and_keeps_the_run(capsys, tmp_path) -> None:  # noqa: ANN001
    port = _port()
    code, d, err, out = _profile(capsys, tmp_path, f"http://127.0.0.1:{port}/ --rate 5 --duration 1",
                                 [sys.executable, "-c", "import time; time.sleep(60)"], "--load-wait", "1")
    assert code == 1
    last = [line for line in err.splitlines() if line.startswith("diag: load:")]
    assert len(last) == 1 and "did not answer within 1 s (--load-wait)" in last[0]
    run = open_run(out)
    assert run.manifest["collectors"]["load"]["status"] == "failed"
    assert run.manifest["duration_s"] < 20  # stopped by diag, not left to sleep


def test_bad_load_words_are_one_line_before_anything_runs(capsys, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "run"
    assert main(["profile", "--out", str(out), "--load", "notaurl --rate 5", "--", "true"]) == 2
    assert main(["profile", "--out", str(out), "--slo", "p99<1ms", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "not an http(s) URL" in err and "--slo needs --load" in err
    assert not out.exists()


def test_load_only_run_speaks_of_the_load(capsys, tmp_path) -> None:  # noqa: ANN001
    import subprocess
    import time

    port = _port()
    proc = subprocess.Popen([sys.executable, UVICORN_SERVER, str(port), "2"])  # 2 x 50 ms: 40/s
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        out = str(tmp_path / "load")
        main(["load", f"http://127.0.0.1:{port}/fixed", "--rate", "15", "--sweep", "--sweep-factor", "2",
              "--sweep-steps", "3", "--sweep-refine", "0", "--duration", "0.8", "--warmup", "0.2",
              "--arrivals", "constant", "--timeout", "3", "--slo", "p99<150ms", "--out", out, "--json"])
    finally:
        proc.terminate()
        proc.wait(5)
    capsys.readouterr()
    assert main(["analyze", out, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rules = [f["rule"] for f in d["findings"]]
    assert "verdict.insufficient_evidence" not in rules and "verdict.load_only" in rules and "load.sweep" in rules
    assert d["primary"] is None and d["metrics"]["load.sweep_best_level"] == 30.0  # 15, 30 held; 60 broke
    assert d["metrics"]["load.client_p50_ms"] > 0 and len(d["load"]["sweep"]["steps"]) == 3
    assert d["load"]["over_time"]["in_flight"]
