"""Synthetic run directories for tests and benchmarks.

`write_synthetic_run(path, duration_s, scenario)` writes a sealed run (run.json
plus Parquet tables, docs/run-format.md) shaped like a real recording at the
default sampling rates, so views and analysis can be exercised and timed on
an hour of data without recording an hour. Scenarios:

- ``gpu_compute``: an H200 serving a bf16 encoder, GEMM kernels, GPM tensor
  activity high, requests with short queue waits.
- ``cpu_preprocess``: a CPU-only run whose stepping thread spends most of its
  time outside the model.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from diag.store.manifest import SCHEMA, write_manifest

SCENARIOS = ("gpu_compute", "cpu_preprocess")
_T0 = 1_790_000_000 * 10**9  # a fixed epoch so fixtures are reproducible


def write_synthetic_run(
    path: str,
    duration_s: float = 60.0,
    scenario: str = "gpu_compute",
    steps_per_s: float = 200.0,
    host_hz: float = 10.0,
    gpu_hz: float = 10.0,
    stack_hz: float = 100.0,
    seed: int = 0,
) -> str:
    """Write a sealed synthetic run to `path` and return it."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; one of {SCENARIOS}")
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(seed)
    gpu = scenario == "gpu_compute"
    start, end = _T0, _T0 + int(duration_s * 1e9)
    startup_ns = int(4.5e9)
    pid, tid = 4242, 4242
    tables: dict[str, pd.DataFrame] = {}

    # Steps: evenly spread after start-up, the first few slower (warm-up).
    n = max(1, int((duration_s - startup_ns / 1e9) * steps_per_s))
    gap = (end - start - startup_ns) / n
    ts = start + startup_ns + (np.arange(n) * gap).astype(np.int64)
    base = 0.6 if gpu else 0.3  # share of the period spent inside the model
    dur = (gap * base * rng.lognormal(0.0, 0.08, n)).astype(np.int64)
    dur[:10] *= np.linspace(30, 1, 10).astype(np.int64)
    tables["steps"] = pd.DataFrame({
        "ts_ns": ts, "dur_ns": dur, "pid": pid, "tid": tid,
        "source": "torch", "model": "TransformerEncoder" if gpu else "ResNet",
        "batch": 8, "shapes": "[[8,128,768]]" if gpu else "[[8,3,224,224]]",
        "dtype": "bfloat16" if gpu else "float32", "device": "cuda:0" if gpu else "cpu",
        "gpu_ns": (dur * 0.9).astype(np.int64) if gpu else -1, "syncs": 1 if gpu else 0,
        "seq": np.arange(n), "in_window": False, "weight": 1,
    })

    # Requests around each step, queue wait before it.
    wait = (rng.exponential(0.002, n) * 1e9).astype(np.int64)
    tables["ranges"] = pd.DataFrame({
        "ts_ns": ts - wait, "dur_ns": dur + wait + 200_000, "pid": pid, "tid": tid,
        "name": "request", "kind": "request", "source": "nvtx", "domain": "", "depth": 0, "weight": 1,
    })

    copies_n = n if gpu else 0
    tables["copies"] = pd.DataFrame({
        "ts_ns": ts[:copies_n] - 100_000, "dur_ns": 80_000, "pid": pid, "tid": tid, "api": "to",
        "direction": "h2d", "bytes": 8 * 128 * 768 * 2, "pinned": False, "non_blocking": False,
        "in_step": False,
    })
    tables["syncs"] = pd.DataFrame({
        "ts_ns": ts[:copies_n] + dur[:copies_n], "dur_ns": 50_000, "pid": pid, "tid": tid,
        "api": "Tensor.item", "in_step": True,
    })
    events = [
        {"ts_ns": start - 50_000_000, "dur_ns": 0, "kind": "process_start", "name": "python"},
        {"ts_ns": start + 100_000_000, "dur_ns": int(2.1e9), "kind": "import", "name": "torch"},
        {"ts_ns": start + int(2.3e9), "dur_ns": int(1.2e9), "kind": "model_load", "name": "torch.load",
         "detail": json.dumps({"file": "model.pt", "bytes": 440_000_000})},
        {"ts_ns": int(ts[0]), "dur_ns": int(dur[0]), "kind": "first_step", "name": "TransformerEncoder"},
    ]
    gc_ts = rng.choice(ts, size=max(1, n // 500), replace=False)
    events += [{"ts_ns": int(t), "dur_ns": 3_000_000, "kind": "gc", "name": "gc",
                "detail": json.dumps({"generation": 2})} for t in gc_ts]
    tables["events"] = pd.DataFrame(events).assign(pid=pid, tid=tid)

    # Host samples: the main process and two workers.
    h_ts = np.arange(start, end, int(1e9 / host_hz), dtype=np.int64)
    m = len(h_ts)
    host = []
    for i, (p, name, cpu) in enumerate([(pid, "python", 140.0 if not gpu else 95.0),
                                        (pid + 1, "python", 30.0), (pid + 2, "python", 30.0)]):
        host.append(pd.DataFrame({
            "ts_ns": h_ts, "pid": p, "ppid": 1 if i == 0 else pid, "name": name,
            "cpu_pct": rng.normal(cpu, 5.0, m).clip(0), "rss_bytes": int(2.5e9 if i == 0 else 3e8),
            "read_bytes": np.cumsum(rng.integers(0, 40_000, m)), "write_bytes": 0,
            "read_chars": np.cumsum(rng.integers(0, 80_000, m)), "write_chars": 0,
            "ctx_vol": np.arange(m) * 50, "ctx_invol": np.arange(m) * 5, "num_threads": 24,
            "iowait_s": 0.0,
        }))
    tables["host"] = pd.concat(host, ignore_index=True)
    threads = []
    for k in range(8):
        busy = 0.9 if k == 0 else 0.3
        threads.append(pd.DataFrame({"ts_ns": h_ts, "pid": pid, "tid": tid + k,
                                     "user_s": np.arange(m) * busy / host_hz, "system_s": np.arange(m) * 0.02 / host_hz}))
    tables["threads"] = pd.concat(threads, ignore_index=True)
    tables["system"] = pd.DataFrame({"ts_ns": h_ts, "cpu_pct": rng.normal(40, 5, m).clip(0, 100),
                                     "iowait_pct": rng.normal(1, 0.3, m).clip(0), "mem_used_bytes": int(40e9),
                                     "mem_total_bytes": int(128e9)})

    if gpu:
        g_ts = np.arange(start, end, int(1e9 / gpu_hz), dtype=np.int64)
        k = len(g_ts)
        warm = g_ts > start + startup_ns
        tables["gpu"] = pd.DataFrame({
            "ts_ns": g_ts, "gpu": 0, "util_gpu": np.where(warm, rng.normal(85, 5, k).clip(0, 100), 0),
            "util_mem": np.where(warm, 40.0, 0.0), "mem_used_bytes": int(30e9), "mem_total_bytes": int(143e9),
            "sm_clock_mhz": np.where(warm, 1980, 345), "mem_clock_mhz": 3201, "sm_clock_max_mhz": 1980,
            "power_w": np.where(warm, 520.0, 90.0), "power_limit_w": 700.0, "temp_c": 55.0, "throttle": 0,
            "throttle_reasons": "", "pcie_tx_bps": 1e8, "pcie_rx_bps": 3e8,
            "sm_active": np.where(warm, 78.0, 0.0), "sm_occupancy": np.where(warm, 35.0, 0.0),
            "tensor_active": np.where(warm, 55.0, 0.0), "dram_bw_util": np.where(warm, 25.0, 0.0),
            "fp32_active": 2.0, "fp16_active": 0.0,
        })
        tables["gpu_procs"] = pd.DataFrame({"ts_ns": g_ts, "gpu": 0, "pid": pid, "used_bytes": int(29e9)})
        tables["kernels"], tables["windows"] = _kernel_windows(ts, dur, rng)

    tables["stacks"] = _stacks(start + startup_ns, end, stack_hz, pid, tid, gpu, rng)
    for name, df in tables.items():
        df.to_parquet(os.path.join(path, f"{name}.parquet"), index=False)

    write_manifest(path, {
        "schema": SCHEMA, "run_id": f"synthetic-{scenario}", "synthetic": True,
        "command": ["python", "serve.py", "--batch", "8"], "cwd": "/srv/app",
        "start_ns": start, "end_ns": end, "duration_s": duration_s, "exit_code": 0, "signal": None,
        "partial": False,
        "host": {"hostname": "synthetic", "cpu_model": "Intel Xeon Platinum 8480+", "cores_logical": 16,
                 "cores_physical": 8, "ram_bytes": int(128e9), "os": "Linux"},
        "gpu": ({"count": 1, "driver": "580.159.04", "cuda_driver": "13.0",
                 "devices": [{"index": 0, "name": "NVIDIA H200", "memory_bytes": int(143e9), "uuid": "GPU-0", "gpm": True}]}
                if gpu else {"count": 0, "reason": "NVML: driver not loaded"}),
        "versions": {"python": "3.12.3", "diag": "0.1.0", "torch": "2.11.0", "onnxruntime": "1.30.0"},
        "env": {"CUDA_VISIBLE_DEVICES": "0"} if gpu else {"OMP_NUM_THREADS": "2"},
        "collectors": {
            "host": {"status": "ok"}, "stacks": {"status": "ok", "rate_hz": stack_hz}, "hooks": {"status": "ok"},
            "gpu": {"status": "ok"} if gpu else {"status": "unavailable", "reason": "NVML: driver not loaded"},
            "kernels": {"status": "ok"} if gpu else {"status": "off", "reason": "no CUDA device"},
        },
        "options": {"host_interval_s": 1 / host_hz, "gpu_interval_s": 1 / gpu_hz, "stack_rate_hz": stack_hz},
    })
    return path


def _kernel_windows(ts: np.ndarray, dur: np.ndarray, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    names = [("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "gemm", 180_000),
             ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "attention", 60_000),
             ("void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>", "norm", 9_000),
             ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise", 12_000)]
    rows, windows = [], []
    for w, first in enumerate([min(100, len(ts) - 1), min(len(ts) // 2, len(ts) - 1)]):
        steps = range(first, min(first + 5, len(ts)))
        for s in steps:
            t = int(ts[s])
            rows.append({"ts_ns": t + 5_000, "dur_ns": 70_000, "window": w, "device": 0, "stream": 7,
                         "name": "Memcpy HtoD (Pageable -> Device)", "category": "memcpy", "kind": "memcpy",
                         "copy_kind": "HtoD", "src_mem": "pageable", "bytes": 1_572_864, "grid": "", "block": ""})
            t += 100_000
            for _layer in range(12):
                for name, cat, d in names:
                    d = int(d * rng.lognormal(0, 0.05))
                    rows.append({"ts_ns": t, "dur_ns": d, "window": w, "device": 0, "stream": 7, "name": name,
                                 "category": cat, "kind": "kernel", "copy_kind": "", "src_mem": "", "bytes": 0,
                                 "grid": "[132,1,1]", "block": "[256,1,1]"})
                    t += d + 3_000
        windows.append({"window": w, "ts_ns": int(ts[first]), "dur_ns": int(ts[steps[-1]] + dur[steps[-1]] - ts[first]),
                        "steps": len(steps), "profiler_start_ns": 4_500_000_000 if w == 0 else 40_000_000,
                        "trace": f"window{w}.json"})
    return pd.DataFrame(rows), pd.DataFrame(windows)


def _stacks(start: int, end: int, hz: float, pid: int, tid: int, gpu: bool, rng: np.random.Generator) -> pd.DataFrame:
    outer = "<module> (serve.py:88);serve_forever (serve.py:61);handle (serve.py:40)"
    choices = [
        (outer + ";_wrapped_call_impl (torch/nn/modules/module.py:1751);_call_impl (torch/nn/modules/module.py:1762);forward (model.py:30)", 0.55 if gpu else 0.3),
        (outer + ";preprocess (serve.py:22);tokenize (text.py:14)", 0.25 if gpu else 0.55),
        (outer + ";recv_batch (serve.py:12);readinto (socket.py:720)", 0.1),
        (outer + ";postprocess (serve.py:50);item (torch/_tensor.py:1)", 0.1 if gpu else 0.05),
    ]
    p = np.array([c[1] for c in choices])
    idx = rng.choice(len(choices), size=int((end - start) / 1e9 * hz), p=p / p.sum())
    # py-spy merges identical consecutive samples into one interval: do the same.
    change = np.flatnonzero(np.diff(idx, prepend=-1))
    # py-spy's clock is not the steps' clock: offset samples so they do not all
    # land exactly on step starts.
    t = start + 3_700_000 + (change * (1e9 / hz)).astype(np.int64)
    d = np.diff(np.append(change, len(idx))) * int(1e9 / hz)
    stacks = np.array([c[0] for c in choices], dtype=object)[idx[change]]
    return pd.DataFrame({"ts_ns": t, "dur_ns": d, "pid": pid, "tid": tid, "stack": stacks,
                         "idle": [s.endswith("(socket.py:720)") for s in stacks]})
