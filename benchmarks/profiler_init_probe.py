"""Where does torch.profiler's first-start cost go, and can it run off the hot path?

Measures on a CUDA machine, in one process:
  1. steps/s of a small GPU loop (baseline);
  2. the same loop while another thread runs the profiler's *prepare* phase
     (Kineto/CUPTI initialisation) — does the main thread slow down?
  3. how long prepare took there, and how long a later start/stop of a
     5-step window costs once CUPTI is initialised.

    python benchmarks/profiler_init_probe.py
"""

from __future__ import annotations

import json
import threading
import time

import torch


def loop(model: torch.nn.Module, x: torch.Tensor, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        model(x)
        torch.cuda.synchronize()
        n += 1
    return n / (time.perf_counter() - t0)


def main() -> None:
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    x = torch.randn(256, 2048, device="cuda")
    loop(model, x, 1.0)
    out: dict[str, float] = {"baseline_steps_per_s": loop(model, x, 3.0)}

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    prof = torch.profiler.profile(activities=acts)
    done: dict[str, float] = {}

    def prepare() -> None:
        t = time.perf_counter()
        prof.prepare_trace()
        done["prepare_s"] = time.perf_counter() - t

    th = threading.Thread(target=prepare)
    t0 = time.perf_counter()
    th.start()
    n = 0
    while th.is_alive():
        model(x)
        torch.cuda.synchronize()
        n += 1
    out["during_prepare_steps_per_s"] = n / (time.perf_counter() - t0)
    out["prepare_s_background"] = done.get("prepare_s", -1.0)
    out["after_prepare_steps_per_s"] = loop(model, x, 3.0)

    t = time.perf_counter()
    prof.start_trace()
    out["start_s"] = time.perf_counter() - t
    for _ in range(5):
        model(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    prof.stop_trace()
    out["stop_s"] = time.perf_counter() - t
    out["kernels_seen"] = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)

    t = time.perf_counter()
    with torch.profiler.profile(activities=acts) as p2:
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
    out["second_window_total_s"] = time.perf_counter() - t
    out["second_window_kernels"] = sum(1 for e in p2.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    out["after_windows_steps_per_s"] = loop(model, x, 3.0)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
