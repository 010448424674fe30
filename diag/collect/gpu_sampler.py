"""GPU sampler: NVML (pynvml from nvidia-ml-py), read-only, every device.

run.json's `gpu` block (`gpu_inventory`) also holds `topology` (`gpu_topology`):
active NVLinks per GPU and, per pair of GPUs, NVLink or the PCIe path between
them, so communication advice can say which one a multi-GPU job has. All
visible GPUs are described: which ones the job's ranks use is known only in
the ranks (their `gpu_procs` rows).

Writes the `gpu` table (one row per device per tick) and `gpu_procs` (compute
processes' memory). On Hopper and newer, where NVML's GPM interface is
supported, it also records SM activity, SM occupancy, tensor activity, DRAM
bandwidth utilization and FP32/FP16 activity: GPM metrics are computed over
two samples, so each tick takes a new sample and computes the metrics over
the interval since the previous one.

Every NVML call may fail on its own (NotSupported on this GPU, permissions):
that column is null and the rest goes on. A call NVML says is not supported
is not asked again on that device. The NVML module is injectable so tests
can run the sampler on a machine without a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from diag.collect import throttle
from diag.collect.sampler import PeriodicSampler, Unavailable

# gpu table column -> pynvml GPM metric constant name. All are percentages,
# except PCIe throughput (MiB/s), converted to bytes per second.
GPM_COLUMNS = {
    "sm_active": "NVML_GPM_METRIC_SM_UTIL",
    "sm_occupancy": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "tensor_active": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "dram_bw_util": "NVML_GPM_METRIC_DRAM_BW_UTIL",
    "fp32_active": "NVML_GPM_METRIC_FP32_UTIL",
    "fp16_active": "NVML_GPM_METRIC_FP16_UTIL",
    "pcie_tx_bps": "NVML_GPM_METRIC_PCIE_TX_PER_SEC",
    "pcie_rx_bps": "NVML_GPM_METRIC_PCIE_RX_PER_SEC",
}
MIB = 1024 * 1024
# GPM metrics over two samples closer than this are noise; such a tick leaves them null.
GPM_MIN_GAP_S = 0.02

# nvmlDeviceGetPcieThroughput blocks ~20 ms per call, so without GPM PCIe is
# read only every this many seconds (null in the rows between).
PCIE_PERIOD_S = 1.0

_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
_FUNCTION_NOT_FOUND = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: driver older than the binding


def _load_nvml() -> Any:
    import pynvml  # nvidia-ml-py

    return pynvml


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _cuda_version(v: int) -> str:
    """NVML's CUDA driver version integer (13000) as "13.0"."""
    return f"{v // 1000}.{(v % 1000) // 10}"


class _Device:
    """Per-device state: the handle, cached static values, GPM samples, unsupported calls."""

    def __init__(self, index: int, handle: Any) -> None:
        self.index = index
        self.handle = handle
        self.unsupported: set[str] = set()
        self.sm_clock_max: int | None = None
        self.gpm = False
        self.gpm_prev: Any = None  # the previous GPM sample (taken)
        self.gpm_prev_t = 0.0  # when it was taken (monotonic)
        self.gpm_next: Any = None  # the buffer the next sample goes into
        self.gpm_ids: dict[str, int] = {}
        self.last_pcie = 0.0


class GpuSampler(PeriodicSampler):
    """Samples every NVIDIA GPU through NVML every `interval_s`."""

    name = "gpu"
    tables = ("gpu", "gpu_procs")

    def __init__(self, interval_s: float = 0.1, nvml: Any = None, gpm: bool = True,
                 gpm_interval_s: float = 1.0) -> None:
        super().__init__(interval_s)
        self._nvml = nvml
        self._gpm = gpm  # --no-gpm: device counters only
        self._gpm_interval_s = max(gpm_interval_s, GPM_MIN_GAP_S)
        self._devices: list[_Device] = []
        self._initialized = False
        self._errors: dict[str, str] = {}  # first error per call, for status()

    def extra_status(self) -> dict[str, Any]:
        st: dict[str, Any] = {}
        if self._devices:
            st["gpm"] = [d.index for d in self._devices if d.gpm]
            st["unsupported"] = sorted({c for d in self._devices for c in d.unsupported})
        if self._errors:
            st["errors"] = dict(self._errors)
        return st

    # -- setup -----------------------------------------------------------------

    def open(self, run_dir: str, root_pid: int) -> dict[str, Any]:
        try:
            nvml = self._nvml = self._nvml or _load_nvml()
        except ImportError:
            raise Unavailable("nvidia-ml-py (pynvml) not installed") from None
        try:
            nvml.nvmlInit()
            self._initialized = True
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as e:
            raise Unavailable(f"NVML: {e}") from None
        if count == 0:
            raise Unavailable("NVML: no NVIDIA GPU")
        for i in range(count):
            try:
                dev = _Device(i, nvml.nvmlDeviceGetHandleByIndex(i))
            except nvml.NVMLError as e:
                self._errors.setdefault("nvmlDeviceGetHandleByIndex", str(e))
                continue
            dev.sm_clock_max = self._call(dev, "nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM)
            if self._gpm:
                self._setup_gpm(dev)
            self._devices.append(dev)
        if not self._devices:
            raise Unavailable("NVML: no device handle")
        return {"devices": len(self._devices)}

    def _setup_gpm(self, dev: _Device) -> None:
        nvml = self._nvml
        support = self._call(dev, "nvmlGpmQueryDeviceSupport")
        if not support or not getattr(support, "isSupportedDevice", 0):
            return
        ids = {col: getattr(nvml, const) for col, const in GPM_COLUMNS.items() if hasattr(nvml, const)}
        prev = self._call(dev, "nvmlGpmSampleAlloc", pass_handle=False)
        nxt = self._call(dev, "nvmlGpmSampleAlloc", pass_handle=False)
        if prev is None or nxt is None or not ids:
            for s in (prev, nxt):
                if s is not None:
                    self._call(dev, "nvmlGpmSampleFree", s, pass_handle=False)
            return
        dev.gpm, dev.gpm_ids, dev.gpm_next = True, ids, nxt
        # the first sample: the first tick computes metrics over [start, tick]
        if self._call(dev, "nvmlGpmSampleGet", prev) is not None:
            dev.gpm_prev, dev.gpm_prev_t = prev, time.monotonic()
        else:
            dev.gpm_next = prev
            self._call(dev, "nvmlGpmSampleFree", nxt, pass_handle=False)
            dev.gpm = False

    def close(self) -> None:
        """Free the GPM samples and shut NVML down (idempotent)."""
        nvml = self._nvml
        for dev in self._devices:
            for s in (dev.gpm_prev, dev.gpm_next):
                if s is not None:
                    try:
                        nvml.nvmlGpmSampleFree(s)
                    except Exception:  # noqa: BLE001,S110 - freeing at exit; nothing to do
                        pass
            dev.gpm_prev = dev.gpm_next = None
        if self._initialized:
            self._initialized = False
            try:
                nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001,S110
                pass

    # -- sampling --------------------------------------------------------------

    def _call(self, dev: _Device, fn_name: str, *args: Any, pass_handle: bool = True) -> Any:
        """One NVML call; None when it fails. Unsupported calls are remembered and skipped."""
        # a call with int arguments (clock type, sensor, counter) is supported or not per argument
        key = fn_name if not args or not all(type(a) is int for a in args) else f"{fn_name}:{args}"
        if key in dev.unsupported:
            return None
        nvml = self._nvml
        fn: Callable[..., Any] | None = getattr(nvml, fn_name, None)
        if fn is None:
            dev.unsupported.add(key)
            return None
        try:
            return fn(dev.handle, *args) if pass_handle else fn(*args)
        except nvml.NVMLError as e:
            if getattr(e, "value", None) in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
                dev.unsupported.add(key)
            else:
                self._errors.setdefault(fn_name, str(e))
            return None
        except Exception as e:  # noqa: BLE001 - a binding/driver mismatch costs one column, not the sampler
            self._errors.setdefault(fn_name, f"{type(e).__name__}: {e}")
            dev.unsupported.add(key)
            return None

    def tick(self) -> None:
        """One sample of every device."""
        for dev in self._devices:
            ts = time.time_ns()
            self.write("gpu", self._device_row(dev, ts))
            procs = self._call(dev, "nvmlDeviceGetComputeRunningProcesses")
            for p in procs or ():
                self.write("gpu_procs", {"ts_ns": ts, "gpu": dev.index, "pid": p.pid,
                                                  "used_bytes": p.usedGpuMemory})

    def _device_row(self, dev: _Device, ts: int) -> dict[str, Any]:
        nvml = self._nvml
        util = self._call(dev, "nvmlDeviceGetUtilizationRates")
        mem = self._call(dev, "nvmlDeviceGetMemoryInfo")
        power = self._call(dev, "nvmlDeviceGetPowerUsage")  # mW
        limit = self._call(dev, "nvmlDeviceGetEnforcedPowerLimit")  # mW
        mask = self._call(dev, "nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:  # drivers before 535 name it ThrottleReasons
            mask = self._call(dev, "nvmlDeviceGetCurrentClocksThrottleReasons")
        row: dict[str, Any] = {
            "ts_ns": ts, "gpu": dev.index,
            "util_gpu": util.gpu if util else None,
            "util_mem": util.memory if util else None,
            "mem_used_bytes": mem.used if mem else None,
            "mem_total_bytes": mem.total if mem else None,
            "sm_clock_mhz": self._call(dev, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": self._call(dev, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            "sm_clock_max_mhz": dev.sm_clock_max,
            "power_w": power / 1000.0 if power is not None else None,
            "power_limit_w": limit / 1000.0 if limit is not None else None,
            "temp_c": self._call(dev, "nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
            "throttle": mask,
            "throttle_reasons": throttle.names(mask) if mask is not None else None,
            "pcie_tx_bps": None, "pcie_rx_bps": None,
        }
        row.update(self._gpm_values(dev))
        if not dev.gpm and time.monotonic() - dev.last_pcie >= PCIE_PERIOD_S:
            dev.last_pcie = time.monotonic()
            tx = self._call(dev, "nvmlDeviceGetPcieThroughput", nvml.NVML_PCIE_UTIL_TX_BYTES)  # KB/s
            rx = self._call(dev, "nvmlDeviceGetPcieThroughput", nvml.NVML_PCIE_UTIL_RX_BYTES)
            row["pcie_tx_bps"] = tx * 1024 if tx is not None else None
            row["pcie_rx_bps"] = rx * 1024 if rx is not None else None
        return row

    def _gpm_values(self, dev: _Device) -> dict[str, Any]:
        """GPM metrics over [previous sample, now]; nulls where unavailable."""
        out: dict[str, Any] = {col: None for col in GPM_COLUMNS if col not in ("pcie_tx_bps", "pcie_rx_bps")}
        if not dev.gpm:
            return out
        nvml = self._nvml
        now = time.monotonic()
        # Reading the counters costs a GPU-bound loop ~3% at 10 Hz (docs/performance.md): a GPM row comes
        # once per gpm_interval_s, averaged over it, and the ticks between leave the columns null.
        if dev.gpm_prev is None or now - dev.gpm_prev_t < max(self._gpm_interval_s - self.interval_s / 2, GPM_MIN_GAP_S):
            return out
        if self._call(dev, "nvmlGpmSampleGet", dev.gpm_next) is None:
            return out  # keep the old previous sample: the next tick spans both intervals
        dev.gpm_prev_t = now
        prev, cur = dev.gpm_prev, dev.gpm_next
        dev.gpm_prev, dev.gpm_next = cur, prev  # reuse the old buffer for the next sample
        req = nvml.c_nvmlGpmMetricsGet_t()
        req.version = nvml.NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(dev.gpm_ids)
        req.sample1 = prev
        req.sample2 = cur
        cols = list(dev.gpm_ids)
        for i, col in enumerate(cols):
            req.metrics[i].metricId = dev.gpm_ids[col]
        if self._call(dev, "nvmlGpmMetricsGet", req, pass_handle=False) is None:
            return out
        for i, col in enumerate(cols):
            m = req.metrics[i]
            if m.nvmlReturn != 0:
                continue
            value = float(m.value)
            out[col] = round(value * MIB) if col.startswith("pcie_") else round(value, 3)
        return out


# nvmlDeviceGetTopologyCommonAncestor levels (nvml.h nvmlGpuTopologyLevel_t): how PCIe joins two GPUs
TOPOLOGY_LEVELS = {0: "same board", 10: "one PCIe switch", 20: "several PCIe switches",
                   30: "one PCIe host bridge", 40: "one NUMA node", 50: "across NUMA nodes (SMP interconnect)"}
NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS in older bindings; newer ones say more, the driver answers per link
_P2P_CAPS_NVLINK = 2  # NVML_P2P_CAPS_INDEX_NVLINK
_P2P_STATUS_OK = 0


def gpu_topology(nvml: Any, handles: list[tuple[int, Any]]) -> dict[str, Any]:
    """How the GPUs talk to each other: active NVLinks per GPU (nvmlDeviceGetNvLinkState per link) and,
    per pair, NVLink (nvmlDeviceGetP2PStatus) or the PCIe path (nvmlDeviceGetTopologyCommonAncestor).
    Never raises.

    `interconnect`: "nvlink" when every pair has NVLink, "pcie" when none has, "mixed" else;
    None with a single GPU or when NVML cannot tell (link null in a pair).
    """

    def get(fn_name: str, *args: Any) -> Any:
        fn = getattr(nvml, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - NotSupported (no NVLink on this board), a missing symbol
            return None

    enabled = getattr(nvml, "NVML_FEATURE_ENABLED", 1)
    nvlinks: dict[int, int | None] = {}
    for index, h in handles:
        if not hasattr(nvml, "nvmlDeviceGetNvLinkState"):
            nvlinks[index] = None  # a binding without the call: unknown, not "no NVLink"
            continue
        active = 0
        for link in range(NVLINK_MAX_LINKS):
            state = get("nvmlDeviceGetNvLinkState", h, link)
            if state is None:
                if link == 0:
                    break  # no NVLink at all (PCIe card, or not supported): do not ask 17 more times
                continue
            active += int(state == enabled)
        nvlinks[index] = active
    pairs = []
    for i, (a, ha) in enumerate(handles):
        for b, hb in handles[i + 1:]:
            level = get("nvmlDeviceGetTopologyCommonAncestor", ha, hb)
            p2p = get("nvmlDeviceGetP2PStatus", ha, hb, getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", _P2P_CAPS_NVLINK))
            if p2p is not None:
                nvlink = p2p == getattr(nvml, "NVML_P2P_STATUS_OK", _P2P_STATUS_OK)
            elif nvlinks.get(a) is None or nvlinks.get(b) is None:
                nvlink = None  # NVML answered nothing about NVLink: unknown
            else:  # no P2P answer: both ends with active links is the best guess
                nvlink = bool(nvlinks[a]) and bool(nvlinks[b])
            pairs.append({"gpus": [a, b], "link": None if nvlink is None else "nvlink" if nvlink else "pcie",
                          "pcie_path": TOPOLOGY_LEVELS.get(level) if isinstance(level, int) else None,
                          "common_ancestor": level if isinstance(level, int) else None})
    links = {p["link"] for p in pairs}
    interconnect = None if not pairs or None in links else links.pop() if len(links) == 1 else "mixed"
    return {"nvlinks": {str(k): v for k, v in nvlinks.items()}, "pairs": pairs, "interconnect": interconnect}


def gpu_inventory(nvml: Any = None) -> dict[str, Any]:
    """The `gpu` block of run.json: count, driver, CUDA driver version, devices.

    Without NVML returns {"count": 0, "reason": ...}. Never raises.
    """
    try:
        nvml = nvml or _load_nvml()
    except ImportError:
        return {"count": 0, "reason": "nvidia-ml-py (pynvml) not installed"}
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        return {"count": 0, "reason": f"NVML: {e}"}
    except Exception as e:  # noqa: BLE001 - a broken binding must not stop the run
        return {"count": 0, "reason": f"NVML: {type(e).__name__}: {e}"}

    def get(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - NVMLError or a missing symbol: leave the field null
            return None

    try:
        count = get(nvml.nvmlDeviceGetCount) or 0
        driver = get(nvml.nvmlSystemGetDriverVersion)
        cuda = get(nvml.nvmlSystemGetCudaDriverVersion)
        devices = []
        handles = []
        for i in range(count):
            h = get(nvml.nvmlDeviceGetHandleByIndex, i)
            if h is None:
                continue
            handles.append((i, h))
            name = get(nvml.nvmlDeviceGetName, h)
            uuid = get(nvml.nvmlDeviceGetUUID, h)
            mem = get(nvml.nvmlDeviceGetMemoryInfo, h)
            support = get(nvml.nvmlGpmQueryDeviceSupport, h)
            # the PCIe link the device can reach (a copy's ceiling; idle links drop to a lower generation)
            pcie_gen = get(getattr(nvml, "nvmlDeviceGetMaxPcieLinkGeneration", None), h)
            pcie_width = get(getattr(nvml, "nvmlDeviceGetMaxPcieLinkWidth", None), h)
            devices.append({
                "index": i,
                "name": _text(name) if name is not None else None,
                "memory_bytes": mem.total if mem is not None else None,
                "uuid": _text(uuid) if uuid is not None else None,
                "gpm": bool(getattr(support, "isSupportedDevice", 0)),
                "pcie_gen": pcie_gen if isinstance(pcie_gen, int) else None,
                "pcie_width": pcie_width if isinstance(pcie_width, int) else None,
            })
        return {
            "count": count,
            "driver": _text(driver) if driver is not None else None,
            "cuda_driver": _cuda_version(cuda) if isinstance(cuda, int) else None,
            "devices": devices,
            "topology": gpu_topology(nvml, handles),
        }
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001,S110
            pass
