"""Small hand-built runs for analysis, engine and rule tests.

`RunBuilder` writes a run directory (run.json + Parquet tables) from a few
calls that describe what the program did, in seconds since the run started.
Scenario functions build one run per label, shaped by how the hardware
behaves rather than by any one workload.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from diag.store.manifest import SCHEMA, write_manifest
from diag.store.run import Run, open_run

T0 = 1_800_000_000 * 10**9
PID, TID = 1000, 1000


def ns(t_s: float) -> int:
    return T0 + int(round(t_s * 1e9))


@dataclass
class RunBuilder:
    path: str
    duration_s: float = 30.0
    gpu: bool = True
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    manifest_extra: dict[str, Any] = field(default_factory=dict)

    def add(self, table: str, **row: Any) -> None:
        self.rows.setdefault(table, []).append(row)

    def steps(self, start_s: float, period_s: float, dur_s: float | list[float], n: int, *, pid: int = PID,
              tid: int = TID, batch: int = 8, dtype: str = "float32", shapes: str = "[[8,3,224,224]]",
              syncs: int = 0, first_dur_s: float | None = None, in_window: set[int] | None = None) -> list[tuple[float, float]]:
        """n steps every period_s; returns their (start, end) in seconds."""
        out = []
        device = "cuda:0" if self.gpu else "cpu"
        for i in range(n):
            t = start_s + i * period_s
            d = dur_s[i] if isinstance(dur_s, list) else dur_s
            if first_dur_s is not None:  # a slow first call pushes the others back
                t += (first_dur_s - period_s) if i else 0.0
                d = first_dur_s if i == 0 else d
            self.add("steps", ts_ns=ns(t), dur_ns=int(d * 1e9), pid=pid, tid=tid, source="torch", model="Net",
                     batch=batch, shapes=shapes, dtype=dtype, device=device, gpu_ns=-1, syncs=syncs, seq=i,
                     in_window=bool(in_window and i in in_window))
            out.append((t, t + d))
        return out

    def request(self, start_s: float, dur_s: float, *, pid: int = PID, tid: int = TID) -> None:
        self.add("ranges", ts_ns=ns(start_s), dur_ns=int(dur_s * 1e9), pid=pid, tid=tid, name="request",
                 kind="request", source="nvtx", domain="", depth=0)

    def copy(self, start_s: float, dur_s: float, nbytes: int, *, pinned: bool = False, direction: str = "h2d",
             in_step: bool = False, tid: int = TID) -> None:
        self.add("copies", ts_ns=ns(start_s), dur_ns=int(dur_s * 1e9), pid=PID, tid=tid, api="to",
                 direction=direction, bytes=nbytes, pinned=pinned, non_blocking=pinned, in_step=in_step)

    def sync(self, start_s: float, dur_s: float, *, in_step: bool = False, api: str = "Tensor.item") -> None:
        self.add("syncs", ts_ns=ns(start_s), dur_ns=int(dur_s * 1e9), pid=PID, tid=TID, api=api, in_step=in_step)

    def event(self, kind: str, start_s: float, dur_s: float = 0.0, name: str = "", detail: Any = None,
              pid: int = PID) -> None:
        self.add("events", ts_ns=ns(start_s), dur_ns=int(dur_s * 1e9), pid=pid, tid=TID, kind=kind,
                 name=name or kind, detail=json.dumps(detail or {}))

    def thread_cpu(self, busy: float, *, pid: int = PID, tid: int = TID, every_s: float = 0.1,
                   run_delay: float = 0.0) -> None:
        """A thread using `busy` cores all run long, and waiting `run_delay` s/s for a core."""
        for t in np.arange(0, self.duration_s + 1e-9, every_s):
            self.add("threads", ts_ns=ns(t), pid=pid, tid=tid, user_s=busy * t, system_s=0.0,
                     run_delay_s=run_delay * t)

    def host(self, cpu_pct: float, *, pid: int = PID, ppid: int = 1, read_bps: float = 0.0,
             read_chars_bps: float = 0.0, iowait: float = 0.0, every_s: float = 0.1) -> None:
        for t in np.arange(0, self.duration_s + 1e-9, every_s):
            self.add("host", ts_ns=ns(t), pid=pid, ppid=ppid, name="python", cpu_pct=cpu_pct,
                     rss_bytes=2 * 2**30, read_bytes=int(read_bps * t), write_bytes=0,
                     read_chars=int(read_chars_bps * t), write_chars=0, ctx_vol=0, ctx_invol=0,
                     num_threads=8, iowait_s=iowait * t)

    def gpu_samples(self, util: float, *, from_s: float = 0.0, mem_util: float = 30.0, gpm: dict[str, float] | None = None,
                    mem_used: float = 20e9, mem_total: float = 141e9, throttle: int = 0, sm_clock: float = 1980,
                    every_s: float = 0.1) -> None:
        for t in np.arange(0, self.duration_s + 1e-9, every_s):
            on = t >= from_s
            row = dict(ts_ns=ns(t), gpu=0, util_gpu=util if on else 0.0, util_mem=mem_util if on else 0.0,
                       mem_used_bytes=mem_used, mem_total_bytes=mem_total, sm_clock_mhz=sm_clock,
                       mem_clock_mhz=3201, sm_clock_max_mhz=1980, power_w=400.0, power_limit_w=700.0,
                       temp_c=60.0, throttle=throttle, throttle_reasons="", pcie_tx_bps=0.0, pcie_rx_bps=0.0)
            for col in ("sm_active", "sm_occupancy", "tensor_active", "dram_bw_util", "fp32_active", "fp16_active"):
                row[col] = (gpm or {}).get(col) if (gpm and on) else (0.0 if gpm else None)
            self.add("gpu", **row)
        self.add("gpu_procs", ts_ns=ns(1.0), gpu=0, pid=PID, used_bytes=int(mem_used))

    def kernel_window(self, window: int, start_s: float, steps: int, kernels: list[tuple[float, float, str]]) -> None:
        """A window of `steps` steps; kernels as (start_s, dur_s, category)."""
        end = max(s + d for s, d, _ in kernels) if kernels else start_s
        self.add("windows", window=window, ts_ns=ns(start_s), dur_ns=int((end - start_s) * 1e9) + 1000,
                 steps=steps, profiler_start_ns=1_000_000, trace=f"w{window}.json")
        for s, d, cat in kernels:
            kind = "memcpy" if cat == "memcpy" else "kernel"
            self.add("kernels", ts_ns=ns(s), dur_ns=int(d * 1e9), window=window, device=0, stream=7,
                     name=f"{cat}_kernel", category=cat, kind=kind, copy_kind="HtoD" if kind == "memcpy" else "",
                     src_mem="pageable" if kind == "memcpy" else "", bytes=0, grid="", block="")

    def stacks(self, samples: list[tuple[float, float, str, bool]], *, pid: int = PID, tid: int = TID) -> None:
        """Stack samples as (start_s, dur_s, stack, idle)."""
        for s, d, stack, idle in samples:
            self.add("stacks", ts_ns=ns(s), dur_ns=int(d * 1e9), pid=pid, tid=tid, stack=stack, idle=idle)

    def write(self) -> Run:
        os.makedirs(self.path, exist_ok=True)
        for table, rows in self.rows.items():
            pd.DataFrame(rows).to_parquet(os.path.join(self.path, f"{table}.parquet"), index=False)
        manifest = {
            "schema": SCHEMA, "run_id": "fixture", "command": ["python", "app.py"], "cwd": "/app",
            "start_ns": T0, "end_ns": ns(self.duration_s), "duration_s": self.duration_s, "exit_code": 0,
            "signal": None, "partial": False,
            "host": {"hostname": "t", "cpu_model": "x", "cores_logical": 16, "cores_physical": 8,
                     "ram_bytes": 64 * 2**30, "os": "Linux"},
            "gpu": ({"count": 1, "devices": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": int(141e9),
                                              "uuid": "GPU-0", "gpm": True}]} if self.gpu else {"count": 0}),
            "versions": {"python": "3.12"}, "env": {},
            "collectors": {"host": {"status": "ok"}, "hooks": {"status": "ok"}, "stacks": {"status": "ok", "rate_hz": 100},
                           "gpu": {"status": "ok" if self.gpu else "unavailable"},
                           "kernels": {"status": "ok" if self.gpu else "off"}},
            "options": {"host_interval_s": 0.1, "gpu_interval_s": 0.1, "stack_rate_hz": 100},
        }
        manifest.update(self.manifest_extra)
        write_manifest(self.path, manifest)
        return open_run(self.path)


STARTUP_S = 4.5  # torch import + CUDA init + a small model load: what ordinary programs pay


def _loop(b: RunBuilder, period: float, inside: float, *, n: int | None = None, start: float = STARTUP_S,
          **kw: Any) -> list[tuple[float, float]]:
    n = n or int((b.duration_s - start - 0.1) / period)
    b.event("import", 0.2, 2.5, "torch")
    b.event("model_load", 2.8, 1.0, "torch.load")
    return b.steps(start, period, period * inside, n, **kw)


def gpu_compute(path: str) -> Run:
    """A GPU busy with GEMMs: forward waits for the GPU inside the step."""
    b = RunBuilder(path, gpu=True)
    _loop(b, 0.010, 0.95, syncs=0, dtype="bfloat16")
    b.thread_cpu(0.95)
    b.host(100)
    b.gpu_samples(95, from_s=STARTUP_S, gpm={"sm_active": 90, "sm_occupancy": 40, "tensor_active": 60,
                                              "dram_bw_util": 30, "fp32_active": 3, "fp16_active": 0})
    return b.write()


def gpu_memory(path: str) -> Run:
    """A busy GPU whose kernels stream memory: DRAM bandwidth high, math pipes quiet."""
    b = RunBuilder(path, gpu=True)
    _loop(b, 0.010, 0.95, dtype="float32")
    b.thread_cpu(0.95)
    b.host(100)
    b.gpu_samples(95, from_s=STARTUP_S, gpm={"sm_active": 95, "sm_occupancy": 70, "tensor_active": 0,
                                              "dram_bw_util": 85, "fp32_active": 12, "fp16_active": 0})
    return b.write()


def gpu_transfer(path: str) -> Run:
    """Each step first copies 60 MB from pageable memory (6 ms at 10 GB/s) then computes for 2 ms."""
    b = RunBuilder(path, gpu=True)
    b.event("import", 0.2, 2.5, "torch")
    period = 0.010
    n = int((b.duration_s - STARTUP_S - 0.1) / period)
    for i in range(n):
        t = STARTUP_S + i * period
        b.copy(t, 0.006, 60_000_000)
    b.steps(STARTUP_S + 0.006, period, 0.002, n)
    b.thread_cpu(0.9)
    b.host(100)
    b.gpu_samples(20, from_s=STARTUP_S, gpm={"sm_active": 20, "sm_occupancy": 10, "tensor_active": 5,
                                              "dram_bw_util": 5, "fp32_active": 5, "fp16_active": 0})
    return b.write()


def gpu_launch(path: str) -> Run:
    """Tiny kernels (4 us) with 12 us launch gaps; the stepping thread is inside forward, on CPU."""
    b = RunBuilder(path, gpu=True)
    steps = _loop(b, 0.002, 0.97, batch=1, shapes="[[1,64]]")
    b.thread_cpu(0.97)
    b.host(100)
    b.gpu_samples(25, from_s=STARTUP_S)
    for w, k in ((0, 200), (1, 800)):
        t0 = steps[k][0]
        kernels = []
        for s in range(3):
            t = steps[k + s][0]
            for j in range(120):
                kernels.append((t + j * 16e-6, 4e-6, "elementwise"))
        b.kernel_window(w, t0, 3, kernels)
    return b.write()


def gpu_cpu_bound(path: str) -> Run:
    """Preprocessing on the stepping thread: 8 ms of CPU work outside the model per 10 ms."""
    b = RunBuilder(path, gpu=True)
    _loop(b, 0.010, 0.2)
    b.thread_cpu(0.97)
    b.host(100)
    b.gpu_samples(18, from_s=STARTUP_S)
    return b.write()


def cpu_compute(path: str) -> Run:
    """CPU inference: the stepping thread is inside the model 95% of the time."""
    b = RunBuilder(path, gpu=False)
    _loop(b, 0.020, 0.95)
    b.thread_cpu(1.0)
    b.host(800)
    return b.write()


def cpu_preprocess(path: str) -> Run:
    """CPU inference where pre-processing on the stepping thread outweighs the model."""
    b = RunBuilder(path, gpu=False)
    _loop(b, 0.020, 0.25)
    b.thread_cpu(1.0)
    b.host(300)
    return b.write()


SOCKET_READ = "<module> (app.py:1);main (app.py:20);fetch (app.py:9);readinto (/usr/lib/python3.12/socket.py:720)"
SOCKET_PREP = "<module> (app.py:1);main (app.py:20);parse (app.py:14)"


def io_socket(path: str, gpu: bool = False) -> Run:
    """Inputs come over a socket: the stepping thread blocks in recv 70% of the time; no disk bytes."""
    b = RunBuilder(path, gpu=gpu)
    period = 0.020
    steps = _loop(b, period, 0.25)
    b.stacks([(end, period * 0.70, SOCKET_READ, True) for _, end in steps]
             + [(end + period * 0.70, period * 0.05, SOCKET_PREP, False) for _, end in steps])  # the rest: parsing
    b.thread_cpu(0.3)
    b.host(150, read_bps=0.0, read_chars_bps=0.0)  # sockets never show up as disk bytes
    if gpu:
        b.gpu_samples(15, from_s=STARTUP_S)
    return b.write()


def cold_start(path: str, gpu: bool = True) -> Run:
    """25 s of startup (a 20 s model load and compile) in a 40 s run."""
    b = RunBuilder(path, duration_s=40.0, gpu=gpu)
    b.event("import", 0.2, 2.5, "torch")
    b.event("model_load", 3.0, 20.0, "torch.load")
    b.steps(23.5, 0.01, 0.0095, int(16.0 / 0.01), first_dur_s=1.5)
    b.thread_cpu(0.9)
    b.host(100)
    if gpu:
        b.gpu_samples(90, from_s=23.5, gpm={"sm_active": 90, "sm_occupancy": 40, "tensor_active": 50,
                                             "dram_bw_util": 25, "fp32_active": 1, "fp16_active": 0})
    return b.write()


def queueing_batch1(path: str, gpu: bool = False) -> Run:
    """A one-thread batch-1 worker always inside forward; requests arrive on another thread and queue."""
    b = RunBuilder(path, gpu=gpu)
    service = 0.010
    steps = _loop(b, service, 1.0, batch=1, shapes="[[1,128]]", tid=2000)
    # requests arrive 3 at a time each 30 ms: each waits behind the others
    for k in range(0, len(steps) - 3, 3):
        arrival = steps[k][0] - 0.004
        for j in range(3):
            b.request(arrival, steps[k + j][1] - arrival + 0.0002, tid=TID)
    b.thread_cpu(1.0, tid=2000)
    b.host(1400)  # intra-op threads spinning
    if gpu:
        b.gpu_samples(30, from_s=STARTUP_S)
    return b.write()


def io_builtin_reads(path: str) -> Run:
    """Inputs read with builtin file reads: the stack shows user code, the thread uses no CPU."""
    b = RunBuilder(path, gpu=False)
    period = 0.020
    steps = _loop(b, period, 0.25)
    user = "<module> (app.py:1);main (app.py:20);load_sample (app.py:9)"
    b.stacks([(end, period * 0.75, user, False) for _, end in steps])
    b.thread_cpu(0.27)  # the model's 25% and a little
    b.host(120, read_bps=80e6, read_chars_bps=80e6)
    return b.write()


def gil_helper_thread(path: str) -> Run:
    """A helper thread prepares batches in Python; the stepping thread waits on a queue for them."""
    b = RunBuilder(path, gpu=True)
    period = 0.020
    steps = _loop(b, period, 0.2)
    wait = "<module> (app.py:1);main (app.py:20);get (/usr/lib/python3.12/queue.py:171)"
    b.stacks([(end, period * 0.8, wait, True) for _, end in steps])
    b.stacks([(STARTUP_S, b.duration_s - STARTUP_S, "run (threading.py:1);prepare (app.py:40)", False)],
             tid=TID + 1)
    b.thread_cpu(0.22)
    b.thread_cpu(0.95, tid=TID + 1)
    b.host(130)
    b.gpu_samples(15, from_s=STARTUP_S)
    return b.write()


def loader_workers(path: str, reading: bool) -> Run:
    """Two DataLoader worker processes feed the stepping thread, which waits on their queue.

    reading=True: the workers block in builtin file reads (stack shows their code, CPU low);
    reading=False: they compute (augmentation), CPU busy.
    """
    b = RunBuilder(path, gpu=True)
    period = 0.020
    steps = _loop(b, period, 0.2)
    wait = "<module> (app.py:1);main (app.py:20);_poll (/usr/lib/python3.12/multiprocessing/connection.py:440)"
    b.stacks([(end, period * 0.8, wait, True) for _, end in steps])
    for k in (1, 2):
        b.stacks([(STARTUP_S, b.duration_s - STARTUP_S, "_worker_loop (torch/utils/data/_utils/worker.py:300);"
                   "__getitem__ (dataset.py:14)", False)], pid=PID + k, tid=PID + k)
        b.host(10 if reading else 95, pid=PID + k, ppid=PID, read_bps=30e6 if reading else 0.0)
    b.thread_cpu(0.22)
    b.host(25)
    b.gpu_samples(15, from_s=STARTUP_S)
    return b.write()
