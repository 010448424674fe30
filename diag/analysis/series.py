"""Time series for views: what the timeline charts draw, already downsampled.

Every series is in seconds since the run started, so charts share one axis
with the phases. Long series are reduced to at most `max_points` buckets
(bucket mean; latency series keep the bucket max so spikes stay visible).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from diag.analysis.ranges import run_requests
from diag.store.run import Run

# The title of each group's panel, in every view.
GROUP_TITLES: dict[str, str] = {
    "gpu": "GPU utilization",
    "gpm": "SM / tensor / DRAM activity",
    "cpu": "CPU",
    "memory": "Memory",
    "io": "I/O",
    "copies": "Copies",
    "latency": "Latency",
}


@dataclass
class Series:
    name: str
    unit: str
    group: str  # charts that share a panel: gpu, gpm, cpu, memory, copies, latency
    t_s: np.ndarray
    values: np.ndarray


def downsample(t_s: np.ndarray, values: np.ndarray, max_points: int, how: str = "mean") -> tuple[np.ndarray, np.ndarray]:
    """Reduce to at most `max_points` equal-width time buckets."""
    ok = ~np.isnan(values)
    t_s, values = t_s[ok], values[ok]
    if len(t_s) <= max_points:
        return t_s, values
    edges = np.linspace(t_s[0], t_s[-1], max_points + 1)
    idx = np.clip(np.searchsorted(edges, t_s, side="right") - 1, 0, max_points - 1)
    grouped = pd.Series(values).groupby(idx)
    agg = grouped.max() if how == "max" else grouped.mean()
    centers = (edges[:-1] + edges[1:]) / 2
    return centers[agg.index.to_numpy()], agg.to_numpy()


def _add(out: list[Series], run: Run, df: pd.DataFrame, col: str, name: str, unit: str, group: str,
         max_points: int, scale: float = 1.0, how: str = "mean") -> None:
    if df.empty or col not in df.columns:
        return
    values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float) * scale
    if np.all(np.isnan(values)):
        return
    t = run.seconds(df["ts_ns"].to_numpy(dtype=np.int64)).astype(float)
    t, v = downsample(t, values, max_points, how)
    out.append(Series(name, unit, group, t, v))


def _rate(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """Per-second rate of a cumulative counter, per process, summed over processes."""
    if df.empty:
        return df
    parts = []
    for _, g in df.groupby("pid"):
        g = g.sort_values("ts_ns")
        dt = g["ts_ns"].diff() / 1e9
        parts.append(pd.DataFrame({"ts_ns": g["ts_ns"], col: (g[col].diff() / dt).clip(lower=0)}))
    rates = pd.concat(parts).dropna()
    return rates.groupby("ts_ns", as_index=False)[col].sum()


def timeline(run: Run, max_points: int = 2000) -> list[Series]:
    """All series with data, in display order."""
    out: list[Series] = []
    gpu = run.table("gpu")
    if not gpu.empty:
        gpu0 = gpu[gpu["gpu"] == gpu["gpu"].min()]
        _add(out, run, gpu0, "util_gpu", "GPU utilization", "%", "gpu", max_points)
        _add(out, run, gpu0, "sm_active", "SM activity", "%", "gpm", max_points)
        _add(out, run, gpu0, "tensor_active", "Tensor activity", "%", "gpm", max_points)
        _add(out, run, gpu0, "dram_bw_util", "DRAM bandwidth", "%", "gpm", max_points)
        _add(out, run, gpu0, "mem_used_bytes", "GPU memory", "GB", "memory", max_points, 1e-9)
        _add(out, run, gpu0, "pcie_rx_bps", "PCIe to GPU", "MB/s", "copies", max_points, 1e-6)
    host = run.table("host")
    if not host.empty:
        tree = host.groupby("ts_ns", as_index=False)[["cpu_pct", "rss_bytes"]].sum()
        _add(out, run, tree, "cpu_pct", "CPU (process tree)", "% of a core", "cpu", max_points)
        _add(out, run, tree, "rss_bytes", "Host memory (RSS)", "GB", "memory", max_points, 1e-9)
        _add(out, run, _rate(host, "read_chars"), "read_chars", "Reads (incl. pipes)", "MB/s", "io", max_points, 1e-6)
    copies = run.table("copies")
    if not copies.empty:
        per_s = copies.assign(sec=(copies["ts_ns"] // 1_000_000_000) * 1_000_000_000)
        mb = per_s.groupby("sec", as_index=False)["bytes"].sum().rename(columns={"sec": "ts_ns"})
        _add(out, run, mb, "bytes", "Host-device copies", "MB/s", "copies", max_points, 1e-6)
    steps = run.table("steps")
    _add(out, run, steps, "dur_ns", "Step latency", "ms", "latency", max_points, 1e-6, how="max")
    requests = run_requests(run)
    if not requests.empty:
        _add(out, run, requests, "dur_ns", "Request latency", "ms", "latency",
             max_points, 1e-6, how="max")
    return out
