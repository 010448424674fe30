"""diagnose(): verdict, too-little-evidence, JSON contract, console view."""

from __future__ import annotations

import json

import analysis_fixtures as F
from analysis_fixtures import RunBuilder

from diag.engine import diagnose
from diag.engine.diagnosis import LABELS, SCHEMA, Diagnosis
from diag.views.console import render_text
from diag.views.json_view import dumps


def test_json_contract_shape(tmp_path):
    d = diagnose(F.gpu_transfer(str(tmp_path)))
    j = json.loads(dumps(d))
    assert j["schema"] == SCHEMA == "diag.diagnosis/1"
    assert set(j) >= {"schema", "run", "primary", "scores", "phases", "findings", "metrics"}
    assert set(j["run"]) >= {"command", "exit_code", "duration_s", "device", "gpu"}
    assert j["run"]["device"] == "cuda" and j["run"]["gpu"] == "NVIDIA H200"
    assert j["primary"] == "transfer_bound"
    assert list(j["scores"]) == list(LABELS)
    assert all(0.0 <= v <= 1.0 for v in j["scores"].values())
    assert [p["name"] for p in j["phases"]][0] == "startup"
    assert all(set(p) == {"name", "start_s", "end_s"} for p in j["phases"])
    f = j["findings"][0]
    assert set(f) >= {"rule", "label", "severity", "title", "evidence", "recommendations"}
    assert f["rule"] == "transfer.copies_dominate" and f["label"] == "transfer_bound"
    assert f["severity"] in ("info", "low", "medium", "high")
    assert set(f["evidence"][0]) >= {"metric", "value", "unit"}
    assert set(f["recommendations"][0]) >= {"text", "code", "expected_gain"}
    assert j["metrics"]["steady.copy_share"] > 0.5
    # round trip
    assert Diagnosis.from_json(j).to_json() == j


def test_no_steps_no_requests_gives_null_with_a_reason(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    b.host(100)
    d = diagnose(b.write())
    assert d.primary is None
    assert d.findings[-1].rule == "verdict.insufficient_evidence"
    assert "no steps and no requests" in d.findings[-1].title
    assert all(v == 0 for v in d.scores.values())
    json.loads(dumps(d))


def test_too_short_steady_state_gives_null(tmp_path):
    b = RunBuilder(str(tmp_path), duration_s=3, gpu=False)
    b.steps(1.5, 0.1, 0.09, 3)
    b.thread_cpu(1.0)
    d = diagnose(b.write())
    assert d.primary is None
    assert "too short" in d.findings[-1].title


def test_cold_start_is_judged_even_with_few_steps(tmp_path):
    b = RunBuilder(str(tmp_path), duration_s=30, gpu=True)
    b.event("import", 0.2, 2.5, "torch")
    b.event("model_load", 3.0, 20.0, "torch.load")
    b.steps(25.0, 1.0, 0.5, 3)
    d = diagnose(b.write())
    assert d.primary == "cold_start"


def test_console_fits_one_screen(tmp_path):
    for make in (F.gpu_transfer, F.queueing_batch1, F.cold_start, F.gpu_launch):
        d = diagnose(make(str(tmp_path / make.__name__)))
        text = render_text(d, width=120)
        assert f"diag verdict: {d.primary}" in text
        assert d.findings[0].title[:40] in text
        assert len(text.splitlines()) <= 40, text


def test_console_without_verdict(tmp_path):
    b = RunBuilder(str(tmp_path), gpu=False)
    text = render_text(diagnose(b.write()))
    assert "diag verdict: none" in text and "Too little evidence" in text


def test_unclosed_ranges_and_null_samples_do_not_break_analysis(tmp_path):
    """A killed run: a request that never closed, GPU samples with nulls, steps without a batch."""
    run_dir = str(tmp_path / "run")
    b = RunBuilder(run_dir, gpu=True)
    F._loop(b, 0.010, 0.95, dtype="bfloat16")
    b.thread_cpu(0.95)
    b.gpu_samples(95, from_s=F.STARTUP_S, gpm={"sm_active": 90, "sm_occupancy": 40, "tensor_active": 60,
                                                "dram_bw_util": 30, "fp32_active": 3, "fp16_active": 0})
    for i in range(50):
        b.request(5 + i * 0.2, 0.005)
    b.add("ranges", ts_ns=F.ns(29.0), dur_ns=None, pid=F.PID, tid=F.TID, name="request", kind="request",
          source="nvtx", domain="", depth=0)
    b.rows["gpu"][100]["util_gpu"] = None
    b.rows["gpu"][101]["dram_bw_util"] = None
    b.rows["steps"][200]["batch"] = -1
    b.manifest_extra = {"partial": True, "end_ns": None}
    d = diagnose(b.write())
    assert d.primary == "compute_bound"
    assert d.run["partial"] is True
    assert d.metrics["steady.requests"] == 50
    json.loads(dumps(d))


def test_imported_kineto_trace_is_all_steady_state():
    import pathlib

    from diag.store.importers import import_trace

    path = pathlib.Path(__file__).parent / "data" / "traces" / "kineto_cuda_synthetic.json"
    run = import_trace(str(path))
    d = diagnose(run)
    assert [p.name for p in d.phases] == ["steady"]
    assert d.metrics["startup.duration_s"] is None and d.metrics["coldstart.share"] is None
    assert d.metrics["run.gpu"] == 1.0  # steps do not say where they ran; kernels do
    assert d.metrics["steady.copy_share"] is None  # no hooks: unknown, not zero
    assert d.metrics["steady.kernel_mean_us"] is not None
    assert d.scores["cold_start"] == 0.0
    json.loads(dumps(d))


def test_fallback_names_a_weak_verdict_rather_than_none(tmp_path):
    """The thread idles between model calls and nothing says on what: a weak io_bound, not null."""
    b = RunBuilder(str(tmp_path), gpu=False)
    F._loop(b, 0.050, 0.2)
    b.thread_cpu(0.2)
    d = diagnose(b.write())
    assert d.primary == "io_bound" and 0 < d.scores["io_bound"] <= 0.25
    assert d.findings[0].rule == "fallback.outside_wait"
    assert "weak evidence" in render_text(d)


def test_fallback_hidden_when_a_sharper_rule_backs_its_label(tmp_path):
    d = diagnose(F.cpu_compute(str(tmp_path)))
    rules = [f.rule for f in d.findings]
    assert "compute.cpu_model_time" in rules and "fallback.model_time" not in rules
