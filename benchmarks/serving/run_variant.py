"""Run one serving benchmark under `diag profile`, drive it with `diag load`, and print diag's verdict.

    .venv/bin/python -m benchmarks.serving.run_variant --server fastapi --variant tokenize --rate 20 \
        --duration 12 [--annotate] [--workers 2] [--out RUN]

Prints one JSON line: the variant, diag's primary label and top scores, diag's request
percentiles next to the server's own handler times, and the client's latency.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DIAG = [sys.executable, "-m", "diag"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_cmd(server: str, port: int, workers: int) -> list[str]:
    if server == "fastapi":
        return [sys.executable, "-m", "uvicorn", "benchmarks.serving.fastapi_app:app", "--port", str(port),
                "--log-level", "warning", "--workers", str(workers)]
    return [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}",
            "--log-level", "warning", "benchmarks.serving.flask_app:app"]


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited early (rc {proc.returncode})")
        try:
            req = urllib.request.Request(url, data=b'{"text": "warm up"}', method="POST",
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=5).read()
            return
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.2)
    raise SystemExit(f"{url} never answered")


def run(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="diag-serving-"))
    out = Path(args.out) if args.out else work / "run"
    env = dict(os.environ, SERVE_VARIANT=args.variant, SERVE_MODEL=args.model, SERVE_ANNOTATE="1" if args.annotate else "0",
               SERVE_TIMES=str(work), PYTHONPATH=str(ROOT), SERVE_MAX_BATCH=str(args.max_batch),
               SERVE_SERVICE_MS=str(args.service_ms))
    prof = subprocess.Popen([*DIAG, "profile", "--out", str(out), "--quiet", "--no-gpu", "--",
                             *server_cmd(args.server, port, args.workers)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/classify"
    try:
        wait_ready(url, prof)
        load = subprocess.run([*DIAG, "load", url, "--rate", str(args.rate), "--duration", str(args.duration),
                               "--warmup", "1", "--body", '{"text": "the quick brown fox jumps over {i} lazy dogs"}',
                               "--header", "Content-Type: application/json", "--timeout", "30",
                               "--out", str(work / "load"), "--json"],
                              cwd=ROOT, capture_output=True, text=True, timeout=args.duration + 120)
    finally:
        prof.send_signal(signal.SIGINT)
        try:
            prof.wait(timeout=90)
        except subprocess.TimeoutExpired:
            prof.kill()
    client = _client(load.stdout)
    ana = subprocess.run([*DIAG, "analyze", str(out), "--json"], cwd=ROOT, capture_output=True, text=True)
    d = json.loads(ana.stdout)
    m = d["metrics"]
    rows = np.array([line.split() for p in sorted(work.glob("times.*.txt")) for line in p.read_text().splitlines()],
                    dtype=float).reshape(-1, 2)
    handler, in_steady = rows[:, 1], _in_steady(rows[:, 0], out, d)
    top = sorted(d["scores"].items(), key=lambda kv: -kv[1])[:3]
    return {
        "server": args.server, "variant": args.variant, "model": args.model, "annotate": args.annotate, "workers": args.workers,
        "rate": args.rate, "primary": d["primary"], "top": {k: v for k, v in top},
        "not_judged": d.get("not_judged", {}), "findings": [f["rule"] for f in d["findings"]][:5],
        "diag_requests": m.get("steady.requests"),
        "diag_p50_ms": m.get("steady.request_p50_ms"), "diag_p99_ms": m.get("steady.request_p99_ms"),
        "diag_handler_p50_ms": m.get("serve.handler_p50_ms"),
        "server_handler_n": int(len(handler)),
        "server_handler_p50_ms": float(np.percentile(handler, 50)) if len(handler) else None,
        "server_handler_p99_ms": float(np.percentile(handler, 99)) if len(handler) else None,
        # the same requests diag's steady.handler_* figures cover: those that started in its steady window
        "server_steady_handler_n": int(in_steady.sum()),
        "server_steady_handler_p50_ms": float(np.percentile(handler[in_steady], 50)) if in_steady.any() else None,
        "server_steady_handler_p99_ms": float(np.percentile(handler[in_steady], 99)) if in_steady.any() else None,
        "client": client, "run": str(out),
    }


def _in_steady(start_ns: np.ndarray, out: Path, diagnosis: dict[str, Any]) -> np.ndarray:
    """Which server-timed requests started inside the steady phase diag chose (all of them if none)."""
    from diag.store.run import open_run

    steady = [p for p in diagnosis.get("phases", []) if p["name"] == "steady"]
    if not steady:
        return np.ones(len(start_ns), dtype=bool)
    t0 = open_run(str(out)).start_ns
    lo, hi = t0 + steady[0]["start_s"] * 1e9, t0 + steady[0]["end_s"] * 1e9
    return (start_ns >= lo) & (start_ns <= hi)


def _client(stdout: str) -> dict[str, Any]:
    """The client's throughput and latency percentiles from `diag load --json` (diag.load/1)."""
    try:
        res = json.loads(stdout)
    except json.JSONDecodeError:
        return {"error": stdout[-300:]}

    def find(o: Any) -> dict[str, Any] | None:  # the summary: the dict that holds p50_ms
        if isinstance(o, dict):
            if "p50_ms" in o:
                return o
            for v in o.values():
                if (hit := find(v)) is not None:
                    return hit
        return None

    s = find(res) or {}
    return {k: s.get(k) for k in ("throughput_per_s", "p50_ms", "p99_ms", "errors")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", choices=("fastapi", "flask"), default="fastapi")
    p.add_argument("--variant", choices=("base", "tokenize", "sleep", "read", "inline"), default="base")
    p.add_argument("--model", choices=("small", "large"), default="small")
    p.add_argument("--annotate", action="store_true")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--max-batch", type=int, default=16, help="the batcher's limit (fastapi)")
    p.add_argument("--service-ms", type=float, default=0,
                   help="pad each model call to this long (fastapi): capacity max-batch * 1000 / service-ms")
    p.add_argument("--rate", type=float, default=20)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--out", default="")
    print(json.dumps(run(p.parse_args())))


if __name__ == "__main__":
    main()
