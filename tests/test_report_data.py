"""The report's plain data (diag.report.data), checked without HTML."""

from __future__ import annotations

import json

import pytest
from report_fixtures import PAYLOAD, make_diagnosis, write_hostile_run

from diag.engine.diagnosis import LABELS
from diag.report import build_report_data
from diag.report.data import TIMELINE_POINTS
from diag.store.run import open_run
from diag.synthetic import write_synthetic_run


@pytest.fixture(scope="module")
def gpu_data(tmp_path_factory):
    path = write_synthetic_run(str(tmp_path_factory.mktemp("gpu") / "run"), 60.0, "gpu_compute")
    return build_report_data(open_run(path), make_diagnosis(60.0))


@pytest.fixture(scope="module")
def cpu_data(tmp_path_factory):
    path = write_synthetic_run(str(tmp_path_factory.mktemp("cpu") / "run"), 30.0, "cpu_preprocess")
    return build_report_data(open_run(path), make_diagnosis(30.0, primary="cpu_bound"))


def test_data_is_plain_json(gpu_data):
    # Plain data only: it must round-trip through JSON unchanged (no numpy, no NaN).
    text = json.dumps(gpu_data, allow_nan=False)
    assert json.loads(text) == gpu_data


def test_verdict_and_scores(gpu_data):
    assert gpu_data["verdict"]["label"] == "compute_bound"
    assert gpu_data["verdict"]["lead"] == "GEMMs keep the tensor cores busy"
    labels = [s["label"] for s in gpu_data["scores"]]
    assert sorted(labels) == sorted(LABELS)
    scores = [s["score"] for s in gpu_data["scores"]]
    assert scores == sorted(scores, reverse=True)
    assert [s["label"] for s in gpu_data["scores"] if s["primary"]] == ["compute_bound"]


def test_no_primary_says_so(tmp_path):
    path = write_synthetic_run(str(tmp_path / "run"), 10.0, "cpu_preprocess")
    data = build_report_data(open_run(path), make_diagnosis(10.0, primary=None))
    assert data["verdict"]["label"] is None
    assert "too little evidence" in data["verdict"]["text"]
    assert not any(s["primary"] for s in data["scores"])


def test_findings_keep_evidence_and_recommendations(gpu_data):
    f = gpu_data["findings"][0]
    assert f["severity"] == "high"
    assert [e["text"] for e in f["evidence"]] == ["86.0%", "55.0%"]
    assert f["evidence"][0]["threshold"] == "> 0.7"
    rec = f["recommendations"][0]
    assert rec["code"].startswith("model = torch.compile(")
    assert rec["expected_gain"] == "up to 30% of step time"


def test_timeline_groups_share_one_clock(gpu_data):
    groups = {g["group"]: g for g in gpu_data["timeline"]["groups"]}
    assert {"gpu", "gpm", "cpu", "memory", "latency"} <= set(groups)
    assert gpu_data["timeline"]["notes"] == []
    for g in groups.values():
        for s in g["series"]:
            assert 0 < len(s["t_s"]) == len(s["values"]) <= TIMELINE_POINTS
            assert 0 <= s["t_s"][0] and s["t_s"][-1] <= 60.0 + 1e-6
    names = [s["name"] for s in groups["gpm"]["series"]]
    assert names == ["SM activity", "Tensor activity", "DRAM bandwidth"]


def test_cpu_run_explains_missing_gpu_from_manifest(cpu_data):
    groups = {g["group"] for g in cpu_data["timeline"]["groups"]}
    assert "gpu" not in groups and "cpu" in groups
    assert cpu_data["timeline"]["notes"] == ["No GPU series: the gpu collector was unavailable (NVML: driver not loaded)."]
    assert cpu_data["gpu_work"]["kernels"] == []
    assert cpu_data["gpu_work"]["note"] == "No kernel data: the kernels collector was off (no CUDA device)."
    assert cpu_data["run"]["gpu"] == "none"


def test_latency_percentiles_and_histogram(gpu_data):
    kinds = [k["kind"] for k in gpu_data["latency"]["kinds"]]
    assert kinds == ["request", "step"]
    for k in gpu_data["latency"]["kinds"]:
        p = k["percentiles"]
        assert list(p) == ["p50", "p90", "p95", "p99"]
        assert p["p50"] <= p["p90"] <= p["p95"] <= p["p99"]
        h = k["histogram"]
        assert len(h["edges"]) == len(h["counts"]) + 1
        # Every call is either in a bin or counted beyond the right edge.
        assert sum(h["counts"]) + h["above"] == k["summary"]["count"]
        assert h["edges"][-1] >= p["p99"]
        assert len(k["slowest"]) == 10
    req = gpu_data["latency"]["kinds"][0]
    assert req["queue"]["matched"] > 0 and req["queue"]["queue_p50_ms"] > 0


def test_breakdown_comes_from_metrics(gpu_data):
    parts = {p["part"]: p["share"] for p in gpu_data["breakdown"]["parts"]}
    assert parts == pytest.approx({"inside model": 0.6, "outside model, working": 0.3,
                                   "outside model, waiting": 0.1, "host-device copies": 0.08,
                                   "synchronizations": 0.02, "GPU idle": 0.14})


def test_breakdown_without_metrics_says_why(tmp_path):
    path = write_synthetic_run(str(tmp_path / "run"), 10.0, "cpu_preprocess")
    diagnosis = make_diagnosis(10.0)
    diagnosis.metrics = {}
    data = build_report_data(open_run(path), diagnosis)
    assert data["breakdown"]["parts"] == [] and "no steady-state" in data["breakdown"]["note"]


def test_icicle_self_times_add_up(gpu_data):
    nodes = gpu_data["stacks"]["tree"]
    assert gpu_data["stacks"]["scope"] == "steady state"
    by_id = {n["id"]: n for n in nodes}
    roots = [n for n in nodes if n["parent"] == ""]
    assert [r["label"] for r in roots] == ["<module> (serve.py:88)"]
    assert all(n["parent"] in by_id for n in nodes if n["parent"])
    # Self times summed over the tree give back the root's total (within rounding).
    assert sum(n["self_s"] for n in nodes) == pytest.approx(roots[0]["total_s"], rel=1e-4)
    assert gpu_data["stacks"]["hot_frames"][0]["frame"] == "forward (model.py:30)"
    assert {r["phase"] for r in gpu_data["stacks"]["hot_frames"]} == {"steady"}


def test_kernels_and_copies(gpu_data):
    g = gpu_data["gpu_work"]
    assert g["note"] == ""
    assert g["kernels"][0]["category"] == "gemm"
    assert {c["category"] for c in g["categories"]} >= {"gemm", "attention", "memcpy"}
    assert g["memcpy"][0]["copy_kind"] == "HtoD" and g["memcpy"][0]["src_mem"] == "pageable"


def test_environment_is_exactly_the_manifest(gpu_data, monkeypatch):
    env = gpu_data["environment"]
    assert env["env"] == [["CUDA_VISIBLE_DEVICES", "0"]]
    assert ["driver", "580.159.04"] in env["gpu"]
    assert ["device 0", "NVIDIA H200, 143 GB, GPM metrics"] in env["gpu"]
    assert ["torch", "2.11.0"] in env["versions"]
    assert {c["name"]: c["status"] for c in env["collectors"]} == {
        "host": "ok", "stacks": "ok", "hooks": "ok", "gpu": "ok", "kernels": "ok"}


def test_environment_never_reads_the_process_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_SECRET_NOT_RECORDED", "hunter2")
    path = write_synthetic_run(str(tmp_path / "run"), 10.0, "cpu_preprocess")
    data = build_report_data(open_run(path), make_diagnosis(10.0))
    assert "hunter2" not in json.dumps(data)
    assert data["environment"]["env"] == [["OMP_NUM_THREADS", "2"]]


def test_hostile_strings_stay_raw_in_data(tmp_path):
    # Data keeps the target's names as they are; escaping is the renderer's job (test_report_html).
    path = write_hostile_run(str(tmp_path / "run"), 20.0)
    data = build_report_data(open_run(path), make_diagnosis(20.0, hostile=PAYLOAD))
    assert PAYLOAD in data["run"]["command"]
    assert any(PAYLOAD in n["label"] for n in data["stacks"]["tree"])
    assert any(k["name"] == PAYLOAD for k in data["gpu_work"]["kernels"])
