"""Host metrics: process-tree CPU against the cores, memory, disk and I/O wait (psutil, py-spy)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from diag.analysis import intervals
from diag.analysis.catalog import Metric
from diag.analysis.columns import _bool
from diag.analysis.context import Context, mean_or_none, num, ratio

# Leaf Python frames that wait on files or sockets. py-spy shows Python frames,
# so a C-level read appears as the library function that called it.
IO_FRAME = re.compile(
    r"(?:read|readinto|readline|readlines|read1|recv|recv_into|recvfrom|recvfrom_into|recvmsg|"
    r"_safe_read|_read_status|begin|getresponse|urlopen|accept|select|poll|_read|fromfile|load|"
    r"sendall|connect|create_connection|_fp_read|readexactly|sock_recv|read_csv|read_parquet|imread|open)"
    r" \((?:[^;()]*/)?(?:socket|ssl|selectors|http/client|urllib/[^;]*|requests/[^;]*|urllib3/[^;]*|"
    r"gzip|bz2|lzma|zipfile|tarfile|_compression|io|codecs|shutil|asyncio/[^;]*|numpy/[^;]*npyio[^;]*|"
    r"numpy/lib/format|PIL/[^;]*|torch/serialization|pandas/io/[^;]*|pyarrow/[^;]*|h5py/[^;]*|"
    r"cv2/[^;]*|fsspec/[^;]*|s3fs/[^;]*|boto[^;]*|datasets/[^;]*)\.py:\d+\)$"
)

METRICS = [
    Metric("steady.process_cpu_cores", "cores", "CPU used by the whole process tree (1 = one core busy)."),
    Metric("steady.cpu_cores", "cores", "Logical cores of the host."),
    Metric("steady.process_cpu_share", "ratio", "Process-tree CPU / logical cores."),
    Metric("steady.worker_cpu_cores", "cores", "CPU used by processes other than the stepping one (workers, children)."),
    Metric("steady.system_cpu_share", "ratio", "Whole-machine CPU busy share."),
    Metric("steady.rss_max_bytes", "bytes", "Peak resident memory of the process tree."),
    Metric("steady.disk_read_bps", "bytes/s", "Storage reads of the process tree (psutil read_bytes)."),
    Metric("steady.read_chars_bps", "bytes/s", "All reads of the process tree, pipes and sockets included (psutil read_chars)."),
    Metric("steady.iowait_share", "ratio", "Block-I/O wait of the process tree per second (psutil iowait; may exceed 1 with several processes)."),
    Metric("steady.system_iowait_share", "ratio", "Whole-machine I/O wait share."),
    Metric("steady.io_wait_share", "ratio", "Share of steady time the stepping thread waits in file or socket reads outside the model (stack samples)."),
    Metric("steady.worker_io_share", "ratio", "Share of other processes' stack samples waiting in file or socket reads (input workers)."),
]


def compute(ctx: Context) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    if ctx.seconds <= 0:
        return out
    cores = (ctx.run.manifest.get("host") or {}).get("cores_logical")
    out["steady.cpu_cores"] = float(cores) if cores else None
    host = ctx.window("host")
    if not host.empty:
        per_pid = host.groupby("pid")["cpu_pct"].apply(lambda s: mean_or_none(num(s)) or 0.0)
        total = float(per_pid.sum()) / 100
        out["steady.process_cpu_cores"] = total
        out["steady.process_cpu_share"] = ratio(total, out["steady.cpu_cores"])
        main_pid = ctx.main[0] if ctx.main else None
        out["steady.worker_cpu_cores"] = float(per_pid[per_pid.index != main_pid].sum()) / 100
        rss = host.groupby("ts_ns")["rss_bytes"].sum()
        out["steady.rss_max_bytes"] = float(rss.max()) if len(rss) else None
        out["steady.disk_read_bps"] = _rate(ctx, "read_bytes")
        out["steady.read_chars_bps"] = _rate(ctx, "read_chars")
        out["steady.iowait_share"] = _rate(ctx, "iowait_s")
    system = ctx.window("system")
    if not system.empty:
        c = mean_or_none(num(system["cpu_pct"]))
        w = mean_or_none(num(system["iowait_pct"]))
        out["steady.system_cpu_share"] = c / 100 if c is not None else None
        out["steady.system_iowait_share"] = w / 100 if w is not None else None
    _stacks(ctx, out)
    return out


def _rate(ctx: Context, col: str) -> float | None:
    """Per-second increase of a cumulative per-process counter over the window, summed over processes."""
    host = ctx.run.table("host")
    total, seen = 0.0, False
    for _, g in host.groupby("pid"):
        ts = g["ts_ns"].to_numpy(dtype=np.int64)
        v = num(g[col])
        ok = ~np.isnan(v)
        ts, v = ts[ok], v[ok]
        if len(ts) < 2:
            continue
        a, b = max(ctx.t0, ts[0]), min(ctx.t1, ts[-1])
        if b <= a:
            continue
        va, vb = intervals.value_at(ts, v, a), intervals.value_at(ts, v, b)
        if va is None or vb is None:
            continue
        seen = True
        total += max(0.0, vb - va) / ((b - a) / 1e9)
    return total if seen else None


def io_frames(stacks: pd.Series) -> pd.Series:
    """Whether each stack's innermost frame waits on a file or socket read."""
    stacks = stacks.astype(str)
    # stacks repeat: judge each distinct one once
    verdict = {s: bool(IO_FRAME.match(s.rpartition(";")[2])) for s in stacks.unique()}
    return stacks.map(verdict).astype(bool)


def _stacks(ctx: Context, out: dict[str, float | None]) -> None:
    st = ctx.window("stacks")
    if st.empty:
        return
    st = st[["ts_ns", "dur_ns", "pid", "tid", "stack", "idle"]]
    leaf_io = io_frames(st["stack"])
    dur = np.nan_to_num(num(st["dur_ns"]), nan=0.0)
    if ctx.main is not None:
        pid, tid = ctx.main
        me = ((st["pid"] == pid) & (st["tid"] == tid)).to_numpy()
        ts = st["ts_ns"].to_numpy(dtype=np.int64)
        mine = ctx.thread_rows(ctx.window("steps", by_end=True), pid, tid, ["ts_ns", "dur_ns"])
        s_ts = mine["ts_ns"].to_numpy(dtype=np.int64)
        outside = ~intervals.inside(ts, s_ts, s_ts + mine["dur_ns"].to_numpy(dtype=np.int64))
        req = ctx.requests()
        if not req.empty:
            # between requests a server waits for the next one: that is load, not input I/O
            r_ts = req["ts_ns"].to_numpy(dtype=np.int64)
            outside &= intervals.inside(ts, r_ts, r_ts + req["dur_ns"].to_numpy(dtype=np.int64))
        if me.any():
            out["steady.io_wait_share"] = float(dur[me & outside & leaf_io.to_numpy()].sum()) / 1e9 / ctx.seconds
        others = (st["pid"] != pid).to_numpy()
        # only threads that do something count: a parked helper thread says nothing about input
        if others.any():
            active_or_io = (~_bool(st["idle"])) | leaf_io.to_numpy()
            sel = others & active_or_io
            tot = float(dur[sel].sum())
            out["steady.worker_io_share"] = float(dur[sel & leaf_io.to_numpy()].sum()) / tot if tot > 0 else None


