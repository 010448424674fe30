"""Does `diag load`'s latency agree with the server's own timing at low load? (issue 14)

    .venv/bin/python benchmarks/load_agreement.py [--rate 10] [--seconds 10] [--service-ms 20] [--repeats 1]
        [--variants uvloop/standard,asyncio/h11,raw/standard]

Starts a uvicorn server (bare ASGI app, its own process) whose handler sleeps a fixed
time and logs, per request, its own start and end on the host's wall clock (the
point a timing middleware sees: the ASGI app call), drives it with `diag load` at a
low rate, and pairs each client row with the server request it caused. Prints, in
ms, the median and p95 of:
- diff: client latency (from the request's due time) minus the server's time;
- send_lag: the due time to the moment the client sent it (diag's own scheduling);
- before: sent to the server's handler start (connection, request write, uvicorn's parse);
- after: the server's handler end to the client's end (response write, client read).
Also how many connections the server saw (keep-alive reuse), and the host's load average while it ran: on a shared 2-core box the figures move with it.

A variant is CLIENT/SERVER: the client is `diag load` on uvloop (`uvloop`, its default where
uvloop is installed) or on asyncio's own loop (`asyncio`, DIAG_LOAD_LOOP=asyncio), or `raw`,
a blocking-socket client with no HTTP library (the floor: what the server and the host cost);
the server is uvicorn as `uvicorn[standard]` installs it (`standard`: uvloop and the httptools
parser) or with neither (`h11`: asyncio's loop, the pure-Python h11 parser). With --repeats,
the variants run interleaved (the shared box drifts), and the medians over the trials end the output.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

SERVER = r'''
import asyncio, os, sys, time
import uvicorn
LOG = open(sys.argv[2], "a", buffering=1)
SERVICE_S = float(sys.argv[3]) / 1e3

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    t0 = time.time_ns()
    while (await receive()).get("more_body"):
        pass
    await asyncio.sleep(SERVICE_S)
    t1 = time.time_ns()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2"), (b"server-timing", f"app;dur={(t1 - t0) / 1e6:.3f}".encode())]})
    await send({"type": "http.response.body", "body": b"ok"})
    LOG.write(f"{t0} {t1} {scope['client'][1] if scope.get('client') else 0}\n")

STANDARD = sys.argv[4] == "standard"  # as uvicorn[standard] runs it
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="on",
            loop="uvloop" if STANDARD else "asyncio", http="httptools" if STANDARD else "h11")
'''

# The floor: a blocking socket, one keep-alive connection, the same constant arrivals; rows as diag stores them.
RAW = r'''
import json, socket, sys, time
host, port, rate, seconds, warmup = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
s = socket.create_connection((host, port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
req = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
start = time.time_ns() + 50_000_000
for i in range(int(rate * (warmup + seconds))):
    due = start + int(i * 1e9 / rate)
    while time.time_ns() < due - 1_500_000:
        time.sleep(0.0005)
    while time.time_ns() < due:
        pass
    sent = time.time_ns()
    s.sendall(req)
    buf = b""
    while True:
        buf += s.recv(65536)
        head, sep, body = buf.partition(b"\r\n\r\n")
        if sep and len(body) >= int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0]):
            break
    end = time.time_ns()
    print(json.dumps({"ts_ns": due, "sent_ns": sent, "end_ns": end, "phase": "warmup" if i < rate * warmup else "measure"}))
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("server did not start") from None
            time.sleep(0.05)


def one(rate: float, seconds: float, service_ms: float, host: str, nice: int = 0,
        rt: bool = False, profile: bool = False, variant: str = "uvloop/standard") -> dict[str, float]:
    """One trial in a fresh server and a fresh `diag load` process; the paired figures."""
    from diag.store.run import open_run

    work = Path(tempfile.mkdtemp(prefix="diag-agree-"))
    log = work / "server.txt"
    port = free_port()
    # --nice -10 (root): both processes ahead of the box's other jobs, to tell the tool from the host
    # --rt: both in SCHED_FIFO, run before every normal job: a quiet box for these two processes
    pre = (lambda: os.nice(nice)) if nice else None
    if rt:
        pre = lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # noqa: E731
    words = ["--rate", str(rate), "--arrivals", "constant", "--duration", str(seconds), "--warmup", "1"]
    url = f"http://{host}:{port}/"
    client, server_kind = variant.split("/")
    server = [sys.executable, "-c", SERVER, str(port), str(log), str(service_ms), server_kind]
    env = {**os.environ, "DIAG_LOAD_LOOP": client}
    load0 = os.getloadavg()[0]
    if profile:  # the load driven by `diag profile --load`, from the recorder's process
        subprocess.run([sys.executable, "-m", "diag", "profile", "--out", str(work / "run"), "--no-gpu", "--no-stacks",
                        "--quiet", "--load", " ".join([url, *words]), "--", *server],
                       cwd=ROOT, capture_output=True, text=True, preexec_fn=pre, env=env)
        load1 = os.getloadavg()[0]
        run = open_run(str(work / "run"))
        res = {"run_dir": str(work / "run"), "stats": run.manifest["load"]["stats"]}
    else:
        srv = subprocess.Popen(server, preexec_fn=pre)
        try:
            wait_port(port)
            if client == "raw":
                out = subprocess.run([sys.executable, "-c", RAW, host, str(port), str(rate), str(seconds), "1"],
                                     capture_output=True, text=True, preexec_fn=pre, check=True)
            else:
                out = subprocess.run([sys.executable, "-m", "diag", "load", url, *words, "--out", str(work / "run"),
                                      "--json"], cwd=ROOT, capture_output=True, text=True, preexec_fn=pre, env=env)
            load1 = os.getloadavg()[0]
        finally:
            srv.terminate()
            srv.wait(10)
        if client == "raw":
            rows = pd.DataFrame([json.loads(line) for line in out.stdout.splitlines()])
            rows["latency_ms"], rows["error"] = (rows["end_ns"] - rows["ts_ns"]) / 1e6, None
            measured = rows[rows["phase"] == "measure"]
            res = {"rows": rows, "stats": {"p50_ms": float(measured["latency_ms"].median())}}
        else:
            res = json.loads(out.stdout)
    rows = res["rows"] if "rows" in res else open_run(res["run_dir"]).table("load_requests")
    rows = rows[(rows["phase"] == "measure") & rows["error"].isna()].sort_values("sent_ns")
    srv_rows = np.array([[int(x) for x in line.split()] for line in log.read_text().splitlines()], dtype=np.int64)
    srv_rows = srv_rows[np.argsort(srv_rows[:, 0])]
    connections = len(set(srv_rows[:, 2].tolist()))  # client ports the server saw (keep-alive reuse)
    # each client request is the first server request that started after it was sent
    idx = np.searchsorted(srv_rows[:, 0], rows["sent_ns"].to_numpy(dtype=np.int64))
    keep = idx < len(srv_rows)
    rows, idx = rows[keep], idx[keep]
    s0, s1 = srv_rows[idx, 0], srv_rows[idx, 1]
    due, sent, end = (rows[c].to_numpy(dtype=np.int64) for c in ("ts_ns", "sent_ns", "end_ns"))
    ok = end >= s1  # a sane pair: the reply came after the handler ended
    parts = {"diff": (end - due) - (s1 - s0), "send_lag": sent - due, "before": s0 - sent, "after": end - s1}
    fig: dict[str, float] = {"requests": float(ok.sum()), "paired_share": float(ok.mean()) if len(ok) else 0.0,
                             "server_p50_ms": float(np.median((s1 - s0)[ok]) / 1e6),
                             "client_p50_ms": float(res["stats"]["p50_ms"]), "loadavg": (load0 + load1) / 2,
                             "connections": float(connections)}
    for k, v in parts.items():
        v = v[ok] / 1e6
        fig[f"{k}_p50_ms"] = float(np.median(v))
        fig[f"{k}_p95_ms"] = float(np.percentile(v, 95))
    if os.environ.get("AGREE_DUMP"):
        for i in np.flatnonzero(ok)[:15]:
            print({k: round(float(v[i]) / 1e6, 3) for k, v in parts.items()}, round((s1 - s0)[i] / 1e6, 3))
    return fig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--service-ms", type=float, default=20.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--nice", type=int, default=0, help="niceness of server and client (-10: ahead of other jobs)")
    p.add_argument("--rt", action="store_true", help="server and client in SCHED_FIFO (root): no wait for a core")
    p.add_argument("--profile", action="store_true", help="drive it with diag profile --load (server under diag)")
    p.add_argument("--host", default="127.0.0.1", help="127.0.0.1 or localhost (name resolution)")
    p.add_argument("--variants", default="uvloop/standard",
                   help="CLIENT/SERVER,...: client uvloop, asyncio or raw; server standard or h11")
    a = p.parse_args()
    variants = a.variants.split(",")
    if a.profile and any(v.startswith("raw/") for v in variants):
        p.error("--profile drives the load with diag; the raw client has no place there")
    trials: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(a.repeats):
        for v in variants:  # interleaved: the shared box drifts between trials
            fig = one(a.rate, a.seconds, a.service_ms, a.host, a.nice, a.rt, a.profile, v)
            trials[v].append(fig)
            print(json.dumps({"variant": v, **{k: round(x, 3) for k, x in fig.items()}}), flush=True)
    if a.repeats > 1 or len(variants) > 1:
        print("medians over the trials:")
        for v, figs in trials.items():
            print(json.dumps({"variant": v, "trials": len(figs),
                              **{k: round(float(np.median([f[k] for f in figs])), 3) for k in figs[0]}}))


if __name__ == "__main__":
    main()
