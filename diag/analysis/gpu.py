"""GPU metrics: NVML utilisation, GPM activity, memory, throttling, and kernel-window statistics."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.context import Context, complete, mean_or_none, num
from diag.collect import throttle

GPM = ("sm_active", "sm_occupancy", "tensor_active", "dram_bw_util", "fp32_active", "fp16_active")
MATMUL = ("gemm", "conv", "attention")
ELEMENTWISE = ("elementwise", "reduction", "norm")

METRICS = [
    Metric("steady.gpu_util", "ratio", "NVML GPU utilisation (time a kernel was running), mean over the steady state."),
    Metric("steady.gpu_busy_kernels", "ratio", "Busy fraction of the GPU inside kernel windows (union of kernel time / window time)."),
    Metric("steady.gpu_busy", "ratio", "GPU busy fraction: NVML utilisation, else the kernel windows' busy fraction."),
    Metric("steady.gpu_mem_util", "ratio", "NVML memory-controller utilisation (time device memory was read or written)."),
    Metric("steady.sm_active", "ratio", "GPM SM activity: fraction of time SMs had a resident warp."),
    Metric("steady.sm_occupancy", "ratio", "GPM SM occupancy: resident warps / maximum."),
    Metric("steady.tensor_active", "ratio", "GPM tensor-core pipe activity."),
    Metric("steady.dram_bw_util", "ratio", "GPM DRAM bandwidth utilisation (fraction of peak)."),
    Metric("steady.fp32_active", "ratio", "GPM FP32 pipe activity."),
    Metric("steady.fp16_active", "ratio", "GPM FP16 pipe activity."),
    Metric("steady.math_active", "ratio", "Busiest math pipe (max of tensor, FP32, FP16 activity), GPM."),
    Metric("steady.gpu_mem_used_ratio", "ratio", "Peak device memory used / device memory total."),
    Metric("steady.gpu_mem_used_bytes", "bytes", "Peak device memory used."),
    Metric("steady.throttle_share", "ratio", "Fraction of GPU samples slowed by power or thermal limits."),
    Metric("steady.power_throttle_share", "ratio", "Fraction of GPU samples slowed by the power cap or power brake."),
    Metric("steady.thermal_throttle_share", "ratio", "Fraction of GPU samples slowed by thermal limits or hardware slowdown."),
    Metric("steady.sm_clock_ratio", "ratio", "Mean SM clock / maximum SM clock while the GPU was busy."),
    Metric("steady.kernels_per_step", "count", "GPU kernels launched per step (kernel windows)."),
    Metric("steady.kernel_mean_us", "us", "Mean GPU kernel duration (kernel windows)."),
    Metric("steady.kernel_gap_mean_us", "us", "Mean idle gap between consecutive kernels on the GPU (kernel windows)."),
    Metric("steady.kernel_idle_share", "ratio", "Share of kernel-window time the GPU ran no kernel."),
    Metric("steady.kernel_matmul_share", "ratio", "Share of kernel time in GEMM, convolution and attention kernels."),
    Metric("steady.kernel_conv_share", "ratio", "Share of kernel time in convolution kernels."),
    Metric("steady.kernel_elementwise_share", "ratio", "Share of kernel time in elementwise, reduction and norm kernels."),
    Metric("steady.kernel_elementwise_wmean_us", "us",
           "Duration-weighted mean of elementwise, reduction and norm kernel durations (sum d^2 / sum d): the "
           "kernel size that work runs in."),
    Metric("steady.memcpy_window_share", "ratio", "Share of kernel-window time with a host<->device memcpy running."),
    Metric("steady.memcpy_exposed_share", "ratio",
           "Share of kernel-window time with a memcpy running and no kernel: copy time not hidden behind compute."),
    Metric("steady.memcpy_pageable_fraction", "ratio", "Fraction of memcpy time in kernel windows from pageable host memory."),
]


def _devices(ctx: Context, gpu: pd.DataFrame) -> list[int]:
    """The GPUs the target used: from per-process memory, else those whose memory grew, else all."""
    procs = ctx.run.table("gpu_procs")
    pids = {int(p) for name in ("host", "steps") for p in ctx.run.table(name)["pid"].dropna().unique()}
    if not procs.empty and pids:
        used = procs[procs["pid"].isin(pids)]["gpu"].dropna().astype(int).unique().tolist()
        if used:
            return sorted(used)
    grew = []
    for dev, g in gpu.groupby("gpu"):
        mem = num(g["mem_used_bytes"])
        if len(mem) and np.nanmax(mem) - np.nanmin(mem) > 256 * 2**20:
            grew.append(int(dev))
    return grew or sorted(gpu["gpu"].dropna().astype(int).unique().tolist())


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if ctx.seconds <= 0:
        return out
    _nvml(ctx, out)
    _kernels(ctx, out)
    if out.get("steady.gpu_util") is not None:
        out["steady.gpu_busy"] = out["steady.gpu_util"]
    elif out.get("steady.gpu_busy_kernels") is not None:
        out["steady.gpu_busy"] = out["steady.gpu_busy_kernels"]
    return out


def _nvml(ctx: Context, out: dict[str, float | None]) -> None:
    full = ctx.run.table("gpu")
    if full.empty:
        return
    gpu = ctx.window("gpu")
    if gpu.empty:
        return
    gpu = gpu[gpu["gpu"].isin(_devices(ctx, full))]
    if gpu.empty:
        return
    # several devices: the busiest one speaks for the program (data parallel copies are alike)
    by_dev = {dev: g for dev, g in gpu.groupby("gpu")}
    util = {dev: mean_or_none(num(g["util_gpu"])) for dev, g in by_dev.items()}
    dev = max(util, key=lambda d: util[d] if util[d] is not None else -1)
    g = by_dev[dev]
    u = util[dev]
    out["steady.gpu_util"] = u / 100 if u is not None else None
    m = mean_or_none(num(g["util_mem"]))
    out["steady.gpu_mem_util"] = m / 100 if m is not None else None
    for col in GPM:
        v = mean_or_none(num(g[col])) if col in g.columns else None
        out[f"steady.{col}"] = v / 100 if v is not None else None
    pipes = [out[f"steady.{c}"] for c in ("tensor_active", "fp32_active", "fp16_active")]
    pipes = [p for p in pipes if p is not None]
    out["steady.math_active"] = max(pipes) if pipes else None
    used, total = num(gpu["mem_used_bytes"]), num(gpu["mem_total_bytes"])
    if np.any(~np.isnan(used)):
        out["steady.gpu_mem_used_bytes"] = float(np.nanmax(used))
        frac = used / total
        if np.any(~np.isnan(frac)):
            out["steady.gpu_mem_used_ratio"] = float(np.nanmax(frac))
    mask = _throttle_mask(g)
    if mask is not None:
        power = (mask & throttle.POWER) != 0
        thermal = (mask & throttle.THERMAL) != 0
        out["steady.power_throttle_share"] = float(power.mean())
        out["steady.thermal_throttle_share"] = float(thermal.mean())
        out["steady.throttle_share"] = float((power | thermal).mean())
    clock, cmax = num(g["sm_clock_mhz"]), num(g["sm_clock_max_mhz"])
    busy = num(g["util_gpu"]) >= 50
    r = clock[busy] / cmax[busy]
    out["steady.sm_clock_ratio"] = mean_or_none(r) if len(r) else None


def _throttle_mask(g: pd.DataFrame) -> np.ndarray | None:
    """Per-sample NVML reason bit mask, from the `throttle` column or the reason names."""
    raw = num(g["throttle"])
    if np.any(~np.isnan(raw)):
        return np.nan_to_num(raw, nan=0).astype(np.int64)
    names = g["throttle_reasons"].dropna()
    if names.empty:
        return None
    return g["throttle_reasons"].fillna("").astype(str).map(throttle.mask).to_numpy(dtype=np.int64)


def _kernels(ctx: Context, out: dict[str, float | None]) -> None:
    k = complete(ctx.run, "kernels")
    if k.empty:
        return
    windows = complete(ctx.run, "windows")
    # prefer windows in the steady state; profiled warm-up steps are still better than nothing
    if not windows.empty:
        in_steady = windows[(windows["ts_ns"] >= ctx.t0) & (windows["ts_ns"] <= ctx.t1)]
        if not in_steady.empty:
            windows = in_steady
            k = k[k["window"].isin(windows["window"])]
    kind = k["kind"].astype(str)
    kern = k[kind == "kernel"]
    copies = k[kind == "memcpy"]
    total_span = 0
    busy = 0
    copy_busy = 0
    exposed = 0
    gaps: list[np.ndarray] = []
    for w, g in k.groupby("window"):
        kg = g[g["kind"].astype(str) == "kernel"]
        row = windows[windows["window"] == w] if not windows.empty else windows
        first = int(g["ts_ns"].min())
        last = int((g["ts_ns"] + g["dur_ns"]).max())
        if not row.empty:
            a = int(row["ts_ns"].iloc[0])
            b = a + int(row["dur_ns"].iloc[0])
            if last > b:
                # The GPU still ran this window's work after the host left it: it runs behind
                # a queue of launches, so its timeline for these steps is the activity span,
                # not the host's (the time before the first activity went to earlier work).
                a, b = first, last
        else:
            a, b = first, last
        if b <= a:
            continue
        total_span += b - a
        ks = kg["ts_ns"].to_numpy(dtype=np.int64)
        ke = ks + kg["dur_ns"].to_numpy(dtype=np.int64)
        busy += intervals.clipped_total(ks, ke, a, b)
        cg = g[g["kind"].astype(str) == "memcpy"]
        cs = cg["ts_ns"].to_numpy(dtype=np.int64)
        ce = cs + cg["dur_ns"].to_numpy(dtype=np.int64)
        copy_busy += intervals.clipped_total(cs, ce, a, b)
        exposed += _uncovered(cs, ce, ks, ke, a, b)
        ms, me = intervals.merge(ks, ke)
        if len(ms) > 1:
            gaps.append(ms[1:] - me[:-1])
    if total_span > 0:
        out["steady.gpu_busy_kernels"] = busy / total_span
        out["steady.kernel_idle_share"] = 1 - busy / total_span
        out["steady.memcpy_window_share"] = copy_busy / total_span
        out["steady.memcpy_exposed_share"] = exposed / total_span
    if not kern.empty:
        kd = num(kern["dur_ns"])
        out["steady.kernel_mean_us"] = float(np.nanmean(kd)) / 1e3
        cat = kern["category"].astype(str)
        tot = float(np.nansum(kd))
        if tot > 0:
            out["steady.kernel_matmul_share"] = float(np.nansum(kd[cat.isin(MATMUL).to_numpy()])) / tot
            out["steady.kernel_conv_share"] = float(np.nansum(kd[(cat == "conv").to_numpy()])) / tot
            ew = kd[cat.isin(ELEMENTWISE).to_numpy()]
            out["steady.kernel_elementwise_share"] = float(np.nansum(ew)) / tot
            if np.nansum(ew) > 0:
                out["steady.kernel_elementwise_wmean_us"] = float(np.nansum(ew * ew) / np.nansum(ew)) / 1e3
        steps = num(windows["steps"]).sum() if not windows.empty else np.nan
        if steps and steps == steps and steps > 0:
            out["steady.kernels_per_step"] = len(kern) / float(steps)
    if gaps:
        allg = np.concatenate(gaps)
        out["steady.kernel_gap_mean_us"] = float(allg.mean()) / 1e3 if len(allg) else None
    if not copies.empty:
        cd = num(copies["dur_ns"])
        pageable = copies["src_mem"].astype(str).eq("pageable").to_numpy()
        tot = float(np.nansum(cd))
        out["steady.memcpy_pageable_fraction"] = float(np.nansum(cd[pageable])) / tot if tot > 0 else None


def _uncovered(cs: np.ndarray, ce: np.ndarray, ks: np.ndarray, ke: np.ndarray, a: int, b: int) -> int:
    """Time in [a, b] covered by the copies but by no kernel (ns).

    A copy engine runs beside the SMs: copy time overlapped with a kernel on another
    stream costs no throughput; only the time copies run alone can be a transfer limit.
    """
    s, e = intervals.merge(np.clip(cs, a, b), np.clip(ce, a, b))
    if len(s) == 0:
        return 0
    under_kernels = intervals.covered(ks, ke, s, e)
    return int(np.sum(e - s) - np.sum(under_kernels))
