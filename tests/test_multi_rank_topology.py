"""NVLink vs PCIe between the job's GPUs, from a fake NVML (run.json gpu.topology)."""

from __future__ import annotations

import pynvml
from test_gpu_sampler import FakeNvml

from diag.collect.gpu_sampler import gpu_inventory, gpu_topology


class TopoNvml(FakeNvml):
    """FakeNvml plus NVLink state, P2P status and the PCIe common ancestor."""

    NVML_FEATURE_ENABLED = pynvml.NVML_FEATURE_ENABLED
    NVML_P2P_CAPS_INDEX_NVLINK = pynvml.NVML_P2P_CAPS_INDEX_NVLINK
    NVML_P2P_STATUS_OK = pynvml.NVML_P2P_STATUS_OK

    def __init__(self, count: int, nvlinks: int, p2p: bool | None = True, level: int = 40) -> None:
        super().__init__(count)
        self.nvlinks, self.p2p, self.level = nvlinks, p2p, level
        self.link_calls = 0

    def nvmlDeviceGetNvLinkState(self, h, link):
        self.link_calls += 1
        if self.nvlinks == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_FEATURE_ENABLED if link < self.nvlinks else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        if self.p2p is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return pynvml.NVML_P2P_STATUS_OK if self.p2p else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self.level


def test_nvlink_pair_like_two_h200s() -> None:
    nvml = TopoNvml(2, nvlinks=18)
    topo = gpu_inventory(nvml)["topology"]
    assert topo["interconnect"] == "nvlink" and topo["nvlinks"] == {"0": 18, "1": 18}
    assert topo["pairs"] == [{"gpus": [0, 1], "link": "nvlink", "pcie_path": "one NUMA node", "common_ancestor": 40}]


def test_pcie_only_cards_are_asked_once_per_gpu() -> None:
    nvml = TopoNvml(4, nvlinks=0, p2p=False, level=50)
    topo = gpu_topology(nvml, [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(4)])
    assert topo["interconnect"] == "pcie" and len(topo["pairs"]) == 6
    assert {p["pcie_path"] for p in topo["pairs"]} == {"across NUMA nodes (SMP interconnect)"}
    assert nvml.link_calls == 4  # link 0 unsupported: the other 17 links are not asked


def test_no_p2p_answer_falls_back_to_link_state() -> None:
    nvml = TopoNvml(2, nvlinks=4, p2p=None)
    assert gpu_topology(nvml, [(0, 0), (1, 1)])["interconnect"] == "nvlink"


def test_one_gpu_has_no_interconnect() -> None:
    nvml = TopoNvml(1, nvlinks=0)
    topo = gpu_inventory(nvml)["topology"]
    assert topo["interconnect"] is None and topo["pairs"] == []
