"""Which async HTTP client can drive diag load's open loop fastest on this box?

Starts a trivial HTTP/1.1 keep-alive server (asyncio protocol, fixed 2-byte
reply) in a subprocess, then for each client and each offered rate runs a
constant-rate open loop in a fresh subprocess, interleaved, and
prints the median over repeats of: achieved replies/s, p99 send lag (actual
send minus scheduled send) and client p50 latency. A rate is *sustained* when
the median achieved rate is >= 97% of the offered one and the p99 send lag is
under 10 ms.

Clients: `aiohttp` and `httpx` under one bare scheduler (the maintained libraries, for
reference: `pip install aiohttp httpx` first), and `diag` and `diag-asyncio`: diag load's
own client (diag.load.client.LoadClient: its scheduler, bookkeeping, a row per request and
its HTTP/1.1 client, diag/load/http1.py) on the loop it picks (uvloop where installed) and
on asyncio's own loop.

    .venv/bin/python benchmarks/load_client.py --rates 250,500,1000,2000,4000 --repeats 3 --seconds 3 \
        [--clients aiohttp,httpx,diag,diag-asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class _Echo(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:  # GET only: a request ends at its blank line
            _, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self.t.write(REPLY)  # type: ignore[attr-defined]


def serve(port: int) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Echo, "127.0.0.1", port, backlog=4096)
        print("ready", flush=True)
        await server.serve_forever()

    asyncio.run(main())


async def _drive_diag(url: str, rate: float, seconds: float) -> dict[str, float]:
    """diag load's own client, as `diag load URL --rate R --arrivals constant --warmup 0` runs it."""
    from diag.load.client import LoadClient
    from diag.load.spec import LoadSpec

    rows: list[dict[str, float]] = []
    async with LoadClient(LoadSpec(url=url, rate=rate, arrivals="constant", duration=seconds, warmup=0),
                          rows.append) as client:
        try:
            await asyncio.wait_for(client.step(rate=rate, seconds=seconds, warmup=0), seconds + 2)
        except asyncio.TimeoutError:  # still waiting 2 s after the end: not sustained
            pass
    lags = sorted((r["sent_ns"] - r["ts_ns"]) / 1e6 for r in rows)
    lats = sorted(r["latency_ms"] for r in rows if not r["error"])
    ok = sum(1 for r in rows if not r["error"])
    return {"achieved": ok / seconds, "lag_p99_ms": lags[int(0.99 * (len(lags) - 1))] if lags else float("inf"),
            "p50_ms": lats[len(lats) // 2] if lats else float("inf")}


async def _drive(lib: str, url: str, rate: float, seconds: float) -> dict[str, float]:
    if lib.startswith("diag"):
        return await _drive_diag(url, rate, seconds)
    lags: list[float] = []
    lats: list[float] = []
    ok = 0
    if lib == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256))

        async def get() -> int:
            async with session.get(url, allow_redirects=False) as r:
                await r.read()
                return r.status

        close = session.close
    else:
        import httpx

        client = httpx.AsyncClient(limits=httpx.Limits(max_connections=256, max_keepalive_connections=256))

        async def get() -> int:
            r = await client.get(url, follow_redirects=False)
            return r.status_code

        close = client.aclose

    async def one(sched: float) -> None:
        nonlocal ok
        lags.append(time.perf_counter() - sched)
        try:
            if await get() == 200:
                ok += 1
        except Exception:  # noqa: BLE001 - counted as not ok
            pass
        lats.append(time.perf_counter() - sched)

    tasks = set()
    start = time.perf_counter() + 0.05
    n = int(rate * seconds)
    for i in range(n):
        sched = start + i / rate
        # sleep even when late, so replies get read (a generator that never yields never measures)
        await asyncio.sleep(max(0.0, sched - time.perf_counter()))
        t = asyncio.create_task(one(sched))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    while tasks and time.perf_counter() - start < seconds + 2:
        await asyncio.sleep(0.01)
    for t in list(tasks):  # still waiting 2 s after the end: not sustained
        t.cancel()
    try:
        await asyncio.wait_for(close(), 2)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001
        pass
    lags.sort()
    lats.sort()
    return {"achieved": ok / seconds, "lag_p99_ms": lags[int(0.99 * (len(lags) - 1))] * 1e3,
            "p50_ms": lats[len(lats) // 2] * 1e3 if lats else float("inf")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", type=int)
    ap.add_argument("--one", nargs=3, metavar=("LIB", "URL", "RATE"))
    ap.add_argument("--rates", default="250,500,1000,2000,4000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--port", type=int, default=18931)
    ap.add_argument("--clients", default="aiohttp,httpx")
    a = ap.parse_args()
    clients = a.clients.split(",")
    if a.serve:
        return serve(a.serve)
    if a.one:
        lib, url, rate = a.one
        if lib.startswith("diag"):
            from diag.load.client import run_loop

            box: list[dict[str, float]] = []

            async def go() -> None:
                box.append(await _drive(lib, url, float(rate), a.seconds))

            run_loop(go())
            print(json.dumps(box[0]))
        else:
            print(json.dumps(asyncio.run(_drive(lib, url, float(rate), a.seconds))))
        return
    srv = subprocess.Popen([sys.executable, __file__, "--serve", str(a.port)], stdout=subprocess.PIPE, text=True)
    assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
    url = f"http://127.0.0.1:{a.port}/"
    rates = [float(r) for r in a.rates.split(",")]
    results: dict[tuple[str, float], list[dict[str, float]]] = {}
    try:
        for _ in range(a.repeats):
            for rate in rates:
                for lib in clients:  # interleaved: the shared box drifts between repeats
                    env = {**os.environ, "DIAG_LOAD_LOOP": "asyncio" if lib == "diag-asyncio" else ""}
                    try:
                        out = subprocess.run([sys.executable, __file__, "--one", lib, url, str(rate),
                                              "--seconds", str(a.seconds)], capture_output=True, text=True,
                                             timeout=a.seconds + 30, env=env, cwd=ROOT)
                        r = json.loads(out.stdout)
                    except (subprocess.TimeoutExpired, ValueError):
                        r = {"achieved": 0.0, "lag_p99_ms": float("inf"), "p50_ms": float("inf")}
                    results.setdefault((lib, rate), []).append(r)
    finally:
        srv.terminate()
    print("| client | offered/s | achieved/s (median) | send lag p99 | p50 latency | sustained |")
    print("|---|---|---|---|---|---|")
    for lib in clients:
        for rate in rates:
            rs = results[(lib, rate)]
            ach = statistics.median(r["achieved"] for r in rs)
            lag = statistics.median(r["lag_p99_ms"] for r in rs)
            p50 = statistics.median(r["p50_ms"] for r in rs)
            ok = ach >= 0.97 * rate and lag < 10
            print(f"| {lib} | {rate:.0f} | {ach:.0f} | {lag:.2f} ms | {p50:.2f} ms | {'yes' if ok else 'no'} |")


if __name__ == "__main__":
    main()
