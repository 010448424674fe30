"""GPU sampler: rows, GPM two-sample logic, NotSupported handling, unavailable path.

A fake NVML module stands in for pynvml (this machine has no GPU). It reuses
pynvml's real ctypes structures and error class, so the struct API the sampler
fills in (c_nvmlGpmMetricsGet_t) is the real one.
"""

from __future__ import annotations

import collections
import ctypes
import time
from types import SimpleNamespace

import pynvml
import pytest

from diag.collect import throttle
from diag.collect.gpu_sampler import GpuSampler, gpu_inventory
from diag.store.jsonl import read_jsonl


def _rows(run_dir, table):
    rows = []
    for f in sorted((run_dir / "raw").glob(f"{table}.*.jsonl")):
        rows += read_jsonl(str(f))
    return rows


class FakeNvml:
    """Mimics the pynvml calls the sampler makes. Device 0 has GPM; device 1 does not,
    and its power reading is not supported."""

    NVMLError = pynvml.NVMLError
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_CLOCK_MEM = pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    NVML_PCIE_UTIL_TX_BYTES = pynvml.NVML_PCIE_UTIL_TX_BYTES
    NVML_PCIE_UTIL_RX_BYTES = pynvml.NVML_PCIE_UTIL_RX_BYTES

    def __init__(self, count: int = 2) -> None:
        for name in dir(pynvml):
            if name.startswith("NVML_GPM_METRIC_"):
                setattr(self, name, getattr(pynvml, name))
        self.count = count
        self.inits = 0
        self.power_calls = collections.defaultdict(int)
        self.samples: dict[int, tuple[int, int]] = {}  # buffer address -> (device, sample number)
        self.taken = collections.defaultdict(int)
        self.pairs: list[tuple[int, int]] = []  # (k1, k2) of each metrics request
        self.freed = 0

    # -- lifecycle, system
    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.inits -= 1

    # PCIe link of device 0 only (device 1's NVML does not say: the fields stay null)
    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        if h.index != 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        if h.index != 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 16

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlSystemGetDriverVersion(self):
        return "580.65.06"

    def nvmlSystemGetCudaDriverVersion(self):
        return 13000

    # -- device
    def nvmlDeviceGetHandleByIndex(self, i):
        return SimpleNamespace(index=i)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200" if h.index == 0 else "NVIDIA A10"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-{h.index}"

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=1000 + h.index, total=150_000_000_000, free=0)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=87, memory=40)

    def nvmlDeviceGetClockInfo(self, h, kind):
        return 1980 if kind == pynvml.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return 1980

    def nvmlDeviceGetPowerUsage(self, h):
        self.power_calls[h.index] += 1
        if h.index == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return 612_500

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 55

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x004 | 0x001  # sw power cap + idle

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        return 100 if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else 200  # KB/s

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=4242, usedGpuMemory=123456789)] if h.index == 0 else []

    # -- GPM
    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(isSupportedDevice=1 if h.index == 0 else 0)

    def nvmlGpmSampleAlloc(self):
        return ctypes.pointer(pynvml.struct_c_nvmlGpmSample_t())

    def nvmlGpmSampleFree(self, s):
        self.freed += 1

    def nvmlGpmSampleGet(self, h, s):
        self.samples[ctypes.addressof(s.contents)] = (h.index, self.taken[h.index])
        self.taken[h.index] += 1
        return s

    def nvmlGpmMetricsGet(self, req):
        assert req.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        d1, k1 = self.samples[ctypes.addressof(req.sample1.contents)]
        d2, k2 = self.samples[ctypes.addressof(req.sample2.contents)]
        assert d1 == d2 == 0
        self.pairs.append((k1, k2))
        for i in range(req.numMetrics):
            m = req.metrics[i]
            if m.metricId == pynvml.NVML_GPM_METRIC_FP16_UTIL:
                m.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            m.nvmlReturn = 0
            # the value says which interval it was computed over
            m.value = m.metricId + k2 / 1000.0
        return req


def test_rows_gpm_and_not_supported(tmp_path):
    nvml = FakeNvml()
    s = GpuSampler(interval_s=0.06, nvml=nvml, gpm_interval_s=0.06)
    s.start(str(tmp_path), 1)
    time.sleep(0.6)
    s.stop()
    st = s.status()
    assert st["status"] == "ok" and st["devices"] == 2 and st["gpm"] == [0]
    assert "nvmlDeviceGetPowerUsage" in st["unsupported"]
    assert nvml.inits == 0  # shut down again
    assert nvml.freed == 2  # both GPM buffers

    rows = _rows(tmp_path, "gpu")
    d0 = [r for r in rows if r["gpu"] == 0]
    d1 = [r for r in rows if r["gpu"] == 1]
    assert len(d0) >= 5 and len(d1) == len(d0)
    r = d0[-1]
    assert r["util_gpu"] == 87 and r["mem_used_bytes"] == 1000 and r["mem_total_bytes"] == 150_000_000_000
    assert r["sm_clock_mhz"] == 1980 and r["mem_clock_mhz"] == 3201 and r["sm_clock_max_mhz"] == 1980
    assert r["power_w"] == 612.5 and r["power_limit_w"] == 700.0 and r["temp_c"] == 55
    assert r["throttle"] == 5 and r["throttle_reasons"] == "gpu_idle,sw_power_cap"

    # NotSupported: null column, the rest goes on, and the call is not repeated every tick
    assert all(r["power_w"] is None for r in d1) and all(r["util_gpu"] == 87 for r in d1)
    assert nvml.power_calls[1] == 1

    # GPM: each tick computes over (previous sample, new sample): consecutive pairs
    assert nvml.pairs == [(k, k + 1) for k in range(len(nvml.pairs))]
    with_gpm = [r for r in d0 if r["sm_active"] is not None]
    # every tick but the first has GPM values (a tick delayed by load may land too close to the last)
    assert len(with_gpm) == len(nvml.pairs) >= len(d0) - 3
    for r, (_, k2) in zip(with_gpm, nvml.pairs, strict=True):
        assert r["sm_active"] == pytest.approx(pynvml.NVML_GPM_METRIC_SM_UTIL + k2 / 1000.0)
        assert r["dram_bw_util"] == pytest.approx(pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL + k2 / 1000.0)
        assert r["tensor_active"] is not None and r["sm_occupancy"] is not None
        assert r["fp32_active"] is not None
        assert r["fp16_active"] is None  # the metric's own nvmlReturn said NotSupported
        # PCIe from GPM (MiB/s -> bytes/s)
        assert r["pcie_tx_bps"] == round((pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC + k2 / 1000.0) * 2**20)

    # no GPM on device 1: GPM columns null, PCIe from the (slow) throughput call, at most once a second
    assert all(r["sm_active"] is None and r["tensor_active"] is None for r in d1)
    pcie = [r for r in d1 if r["pcie_tx_bps"] is not None]
    assert len(pcie) == 1 and pcie[0]["pcie_tx_bps"] == 100 * 1024 and pcie[0]["pcie_rx_bps"] == 200 * 1024

    procs = _rows(tmp_path, "gpu_procs")
    assert procs and all(p == {"ts_ns": p["ts_ns"], "gpu": 0, "pid": 4242, "used_bytes": 123456789} for p in procs)


def test_gpm_rows_come_once_per_gpm_interval(tmp_path):
    # the GPM counters are read less often than the rest (reading them slows the GPU's kernels)
    nvml = FakeNvml(count=1)
    s = GpuSampler(interval_s=0.05, nvml=nvml, gpm_interval_s=0.4)
    s.start(str(tmp_path), 1)
    time.sleep(1.3)
    s.stop()
    rows = _rows(tmp_path, "gpu")
    with_gpm = [r for r in rows if r["sm_active"] is not None]
    assert len(rows) >= 12 and 2 <= len(with_gpm) <= 4
    assert all(r["util_gpu"] == 87 for r in rows)  # the other columns every tick
    # each GPM row spans the whole interval since the previous one: consecutive samples still pair up
    assert nvml.pairs == [(k, k + 1) for k in range(len(nvml.pairs))]
    gaps = [(b["ts_ns"] - a["ts_ns"]) / 1e9 for a, b in zip(with_gpm, with_gpm[1:], strict=False)]
    assert all(g > 0.3 for g in gaps)


def test_init_failure_is_unavailable(tmp_path):
    nvml = FakeNvml()

    def broken():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    nvml.nvmlInit = broken
    s = GpuSampler(nvml=nvml)
    s.start(str(tmp_path), 1)
    s.stop()
    assert s.status() == {"status": "unavailable", "reason": "NVML: Driver Not Loaded"}
    assert gpu_inventory(nvml) == {"count": 0, "reason": "NVML: Driver Not Loaded"}


def test_zero_devices_is_unavailable(tmp_path):
    s = GpuSampler(nvml=FakeNvml(count=0))
    s.start(str(tmp_path), 1)
    s.stop()
    assert s.status()["status"] == "unavailable"


def test_real_nvml_unavailable_here(tmp_path):
    """This machine has no driver: the real pynvml path reports NVML's reason."""
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")
    except pynvml.NVMLError:
        pass
    s = GpuSampler()
    s.start(str(tmp_path), 1)
    s.stop()
    st = s.status()
    assert st["status"] == "unavailable" and st["reason"].startswith("NVML: ")
    inv = gpu_inventory()
    assert inv["count"] == 0 and inv["reason"].startswith("NVML: ")
    assert not list((tmp_path / "raw").glob("gpu*")) if (tmp_path / "raw").exists() else True


def test_inventory():
    nvml = FakeNvml()
    inv = gpu_inventory(nvml)
    assert inv.pop("topology")["interconnect"] is None  # no NVLink calls in this fake: tests/test_multi_rank_topology.py
    assert inv == {
        "count": 2, "driver": "580.65.06", "cuda_driver": "13.0",
        "devices": [
            {"index": 0, "name": "NVIDIA H200", "memory_bytes": 150_000_000_000, "uuid": "GPU-0", "gpm": True,
             "pcie_gen": 5, "pcie_width": 16},
            {"index": 1, "name": "NVIDIA A10", "memory_bytes": 150_000_000_000, "uuid": "GPU-1", "gpm": False,
             "pcie_gen": None, "pcie_width": None},
        ],
    }
    assert nvml.inits == 0


def test_throttle_names():
    assert throttle.names(0) == ""
    assert throttle.names(0x4 | 0x40) == "sw_power_cap,hw_thermal_slowdown"
    # the analysis reads names back into the same bits, and groups them once
    assert throttle.mask("sw_power_cap,hw_thermal_slowdown,unknown") == 0x4 | 0x40
    assert throttle.mask(throttle.names(0x1FF)) == 0x1FF
    assert throttle.POWER == 0x004 | 0x080 and throttle.THERMAL == 0x020 | 0x040 | 0x008


def test_fake_matches_pynvml():
    """Every NVML function the fake mimics exists in the installed pynvml under that name."""
    names = [n for n in vars(FakeNvml) if n.startswith("nvml")]
    assert len(names) > 15
    assert [n for n in names if not callable(getattr(pynvml, n, None))] == []


def test_unexpected_exception_costs_one_column(tmp_path):
    nvml = FakeNvml(count=1)

    def broken(h):
        raise TypeError("binding mismatch")

    nvml.nvmlDeviceGetTemperature = broken
    s = GpuSampler(interval_s=0.05, nvml=nvml)
    s.start(str(tmp_path), 1)
    time.sleep(0.3)
    s.stop()
    st = s.status()
    assert st["status"] == "ok" and "TypeError" in st["errors"]["nvmlDeviceGetTemperature"]
    rows = _rows(tmp_path, "gpu")
    assert rows and all(r["temp_c"] is None and r["util_gpu"] == 87 for r in rows)


def test_pinned_copy_speedup_comes_from_the_pcie_link() -> None:
    from diag.analysis.links import pcie_bps

    gpu = {"devices": [{"index": 0, "pcie_gen": 5, "pcie_width": 16}]}
    assert pcie_bps({"gpu": gpu}) == pytest.approx(63.0e9, rel=0.01)
    assert pcie_bps({"gpu": {"devices": [{"pcie_gen": None, "pcie_width": None}]}}) is None
    assert pcie_bps({}) is None
