"""Link rates a run's GPU inventory implies (run.json `gpu`): the ceilings copies and collectives are judged against."""

from __future__ import annotations

from typing import Any

# PCIe bytes/s per lane and direction, by generation (after line coding)
PCIE_LANE_BPS = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}
# NVLink bytes/s per link and direction: NVLink 3 and 4 (A100, H100, H200) 25 GB/s, NVLink 5 (Blackwell) 50
NVLINK_BPS = 25e9
NVLINK5 = ("B100", "B200", "B300", "GB200", "GB300")


def _devices(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    gpu = manifest.get("gpu")
    devices = gpu.get("devices") if isinstance(gpu, dict) else None
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def pcie_bps(manifest: dict[str, Any]) -> float | None:
    """The first GPU's PCIe link rate per direction (bytes/s), or None when not recorded."""
    for d in _devices(manifest):
        gen, width = d.get("pcie_gen"), d.get("pcie_width")
        if gen in PCIE_LANE_BPS and isinstance(width, int) and width > 0:
            return PCIE_LANE_BPS[gen] * width
    return None


def nvlink_bps(manifest: dict[str, Any]) -> float | None:
    """Peer link rate per direction (bytes/s) from the recorded NVLink topology (fewest links of a GPU)."""
    gpu = manifest.get("gpu")
    topo = gpu.get("topology") if isinstance(gpu, dict) else None
    links = topo.get("nvlinks") if isinstance(topo, dict) else None
    if not isinstance(links, dict) or not links or topo.get("interconnect") != "nvlink":
        return None
    counts = [v for v in links.values() if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    if not counts:
        return None
    names = " ".join(str(d.get("name", "")) for d in _devices(manifest))
    return min(counts) * NVLINK_BPS * (2 if any(n in names for n in NVLINK5) else 1)
