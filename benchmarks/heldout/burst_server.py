"""An in-process scoring service with a 4-thread worker pool, fed in bursts.

Clients (one traffic thread here) send requests in bursts: 24 at once, then a
pause, as when a batch job upstream flushes. Each request is an NVTX range
named "request" opened on arrival (nvtx.start_range) and closed by the pool
thread that answers it, batch size 1 (no batching). The burst period is set
from the measured single-request service time so the average load stays at
about half of one worker's capacity.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import nvtx
import torch
from _cli import StopFlag, options, report
from torch import nn

WORKERS, BURST, LOAD = 4, 24, 0.5
FEATURES = {"cpu": 512, "cuda": 2048}


def build(features: int) -> nn.Module:
    return nn.Sequential(nn.LayerNorm(features), nn.Linear(features, 4 * features), nn.GELU(),
                         nn.Linear(4 * features, features), nn.GELU(), nn.Linear(features, 16))


def main() -> None:
    a = options(__doc__.splitlines()[0])
    if a.device == "cpu":
        torch.set_num_threads(1)  # one intra-op thread per pool worker, as CPU servers do
    f = FEATURES[a.device]
    model = build(f).to(a.device).eval()
    done = []
    lock = threading.Lock()

    def serve(rid: int, payload: list[float]) -> None:
        x = torch.tensor(payload, dtype=torch.float32).view(1, f).to(a.device)
        with torch.inference_mode():
            label = int(model(x).argmax())
        nvtx.end_range(rid)
        with lock:
            done.append(label)

    rng = random.Random(3)
    payloads = [[rng.gauss(0, 1) for _ in range(f)] for _ in range(BURST)]
    t = time.perf_counter()
    for p in payloads[:8]:  # warm-up, and measure one request's service time
        t = time.perf_counter()
        serve(nvtx.start_range(message="warmup"), p)
    service = time.perf_counter() - t
    period = BURST * service / LOAD
    stop = StopFlag(a.seconds)
    sent = 0
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="scorer") as pool:
        while not stop:
            for p in payloads:
                pool.submit(serve, nvtx.start_range(message="request"), p)
                sent += 1
            stop.sleep(period * rng.uniform(0.8, 1.2))
    report("burst_server", len(done), "requests", stop.elapsed(), a.device,
           f"bursts of {BURST} every {period * 1000:.0f} ms, {WORKERS} workers")


if __name__ == "__main__":
    main()
