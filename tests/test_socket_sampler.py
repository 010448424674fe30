"""Requests waiting in the kernel: /proc/net/tcp parsing, the sampler on real sockets, and the analysis
of a recorded overloaded Flask + gunicorn server (a sync worker's accept backlog)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diag.collect.socket_sampler import SocketSampler, TcpRow, backlog_rows, parse_tcp
from diag.engine import diagnose
from diag.store.run import open_run

DATA = Path(__file__).parent / "data" / "serving"

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000800:00000003 00:00000000 00000000     0        0 4242 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:0000004D 00:00000000 00000000     0        0 5151 1 0 20 4 30 10 -1
   2: 0100007F:1F90 0100007F:C351 01 00000000:00000000 00:00000000 00000000     0        0 5152 1 0 20 4 30 10 -1
   3: 0100007F:1F90 0100007F:C352 03 00000000:00000030 00:00000000 00000000     0        0 0 1 0 20 4 30 10 -1
   4: 0100007F:C350 0100007F:1F90 01 00000000:00000010 00:00000000 00000000     0        0 6161 1 0 20 4 30 10 -1
   5: garbage line
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000800:00000002 00:00000000 00000000     0        0 4243 1 0 100 0 0 10 0
   1: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000080:00000009 00:00000000 00000000     0        0 9999 1 0 100 0 0 10 0
"""


def test_parse_tcp_reads_port_state_queues_and_inode() -> None:
    rows = parse_tcp(TCP)
    assert len(rows) == 4  # header, the malformed line and a state neither listening nor established skipped
    assert rows[0] == TcpRow(port=8080, state="0A", rx_queue=3, inode=4242)
    assert rows[1] == TcpRow(port=8080, state="01", rx_queue=0x4D, inode=5151)
    assert parse_tcp(TCP6)[0] == TcpRow(port=8080, state="0A", rx_queue=2, inode=4243)


def test_backlog_counts_the_accept_queue_and_unread_accepted_connections_of_our_ports() -> None:
    rows = parse_tcp(TCP) + parse_tcp(TCP6)
    ours = {4242, 4243, 5151, 5152, 6161}
    # port 8080 listens on IPv4 and IPv6: queues added; 5151 has unread bytes, 5152 none; the line with
    # inode 0 is not accepted yet (the listening socket counts it); 6161 is a client (ephemeral port);
    # port 80 listens through a socket that is not ours
    assert backlog_rows(rows, ours) == {8080: {"accept_queue": 5, "unread": 1}}
    assert backlog_rows(rows, set()) == {}


def test_sampler_sees_unaccepted_and_unread_connections(tmp_path: Path) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    accepted, _ = srv.accept()  # one taken, three still in the accept queue
    clients[0].sendall(b"GET / HTTP/1.1\r\n\r\n")  # a request on it the server has not read
    time.sleep(0.05)
    s = SocketSampler(interval_s=0.05)
    try:
        s.start(str(tmp_path), os.getpid())
        time.sleep(0.4)
    finally:
        s.stop()
        for c in [*clients, accepted, srv]:
            c.close()
    st = s.status()
    assert st["status"] == "ok" and port in st["ports"]
    rows = [json.loads(line) for f in (tmp_path / "raw").glob("sockets*") for line in f.read_text().splitlines()]
    mine = [r for r in rows if r["port"] == port]
    assert mine and all(r["accept_queue"] == 3 and r["unread"] == 1 for r in mine)


def test_sampler_writes_nothing_without_a_listening_socket(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    s = SocketSampler(interval_s=0.05)
    try:
        s.start(str(tmp_path), child.pid)
        time.sleep(0.3)
    finally:
        s.stop()
        child.kill()
        child.wait()
    assert s.status()["ports"] == []
    assert not any(f.read_text() for f in (tmp_path / "raw").glob("sockets*"))


def test_a_busy_sync_worker_backlog_is_queueing() -> None:
    """gunicorn, one sync worker, the large model inline (~7.6 ms), 200 req/s offered: requests wait
    seconds in the accept queue, where the server's own timing (and the request hooks) cannot see them."""
    run = open_run(str(DATA / "flask-overloaded"))
    d = diagnose(run)
    own = json.loads((DATA / "flask-overloaded" / "server_times.json").read_text())
    m = d.metrics
    assert d.primary == "queueing" and d.margin >= 0.2, (d.primary, d.scores)
    assert m["steady.pre_handler_wait_p50_ms"] < 1  # what the hooks measure: ~nothing
    # Little's law on the sampled backlog gives the wait the client saw (its p50; the queue grew steadily)
    seen = m["steady.backlog_wait_ms"] + m["steady.handler_p50_ms"]
    assert seen == pytest.approx(own["client"]["p50_ms"], rel=0.25)
    assert m["steady.pre_handler_wait_share"] > 0.95
    parts = {p["part"]: p for p in d.serving["parts"]}
    assert parts["backlog"]["share"] > 0.95
    assert any(f.rule == "serve.wait_before_handler" for f in d.findings)


def test_a_short_accept_wait_on_a_light_load_is_not_a_queue() -> None:
    """gunicorn, 2 sync workers, 30 req/s of 2.4 ms requests: each new connection waits ~1 ms to be
    accepted (a worker's wake-up), a third of the request time but shorter than serving it."""
    from serving_rule_cases import CPU, metrics

    from diag.engine.diagnose import evaluate_rule
    from diag.engine.rules import load_rules

    rule = next(r for r in load_rules() if r.id == "serve.wait_before_handler")
    light = metrics(**CPU, steady__requests_found=300, steady__pre_handler_wait_share=0.34,
                    steady__pre_handler_wait_mean_ms=1.0, steady__handler_p50_ms=2.4)
    assert evaluate_rule(rule, light) is None
    light["steady.pre_handler_wait_mean_ms"] = 30.0  # waiting longer than served: queued
    assert evaluate_rule(rule, light) is not None


def test_a_sync_handler_blocked_in_a_call_is_io_bound() -> None:
    """gunicorn, one sync worker, a 20 ms time.sleep in each ~23 ms handler, 20 req/s: the worker is off
    the CPU in the handler, which py-spy's idle flag does not show (time.sleep); its CPU counters do."""
    d = diagnose(open_run(str(DATA / "flask-sleep")))
    assert d.primary == "io_bound" and d.margin >= 0.2, (d.primary, d.scores)
    assert 0.5 <= d.metrics["steady.handler_blocked_share"] <= 0.9
    f = next(f for f in d.findings if f.rule == "serve.handler_blocked")
    assert "flask_app.py:51" in f.title  # the line of the sleep
    # a handler that tokenizes on the CPU is not blocked
    tok = diagnose(open_run(str(DATA / "flask-tokenize")))
    assert tok.metrics["steady.handler_blocked_share"] < 0.2 and tok.primary == "cpu_bound"
