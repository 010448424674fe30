"""`diag compare`: real recorded runs (H200 pairs under tests/data/gpu, CPU runs recorded here),
the statistics, the CI gate both ways, bad input, and the JSON schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from diag.analysis import compare as cmp
from diag.analysis.units import format_value
from diag.cli import main
from diag.compare_command import open_side
from diag.engine.gate import check, parse_budget
from diag.errors import DiagError
from diag.views.compare import build

DATA = os.path.join(os.path.dirname(__file__), "data", "gpu")
MLP, GRAPH = os.path.join(DATA, "ranker_mlp"), os.path.join(DATA, "ranker_graph")
SERVER = os.path.join(DATA, "encoder_server")


def _compare(a: list[str], b: list[str]) -> dict:
    return cmp.compare(open_side(a, []), open_side(b, []))


@pytest.fixture(scope="module")
def graph_inputs() -> tuple[list, list]:
    return open_side([MLP], []), open_side([GRAPH], [])


@pytest.fixture(scope="module")
def graph_pair(graph_inputs) -> dict:
    """ranker_mlp (launch-bound, eager) against ranker_graph, its CUDA-graph twin, on the H200."""
    return cmp.compare(*graph_inputs)


@pytest.fixture(scope="module")
def self_pair() -> dict:
    return _compare([SERVER], [SERVER])


# -- the H200 pair --------------------------------------------------------------------------------

def test_graph_twin_is_faster_and_inside_the_prediction(graph_pair):
    c = graph_pair
    assert c["schema"] == "diag.compare/1"
    steps = next(f for f in c["figures"] if f["metric"] == "steady.steps_per_s")
    assert steps["word"] == "faster"
    assert steps["change_ci"][0] > 5  # more than 6x, the whole interval
    assert steps["a_ci"][0] < steps["a"] < steps["a_ci"][1]
    top = c["predictions"][0]
    assert top["rule"] == "launch.tiny_kernels" and top["primary"] and top["gain_on"] == "throughput"
    assert top["within_bound"] is True and top["realised"] <= top["gain_max"]
    # the point prediction (kernel time + host time per step) lands within 25% of what the graph gave
    assert top["near_point"] is True and abs(top["realised"] / top["gain_point"] - 1) < 0.25
    assert any("different programs" in w for w in c["warnings"])  # a twin is another script: said, compared
    assert c["verdict"]["a"]["primary"] == "launch_bound"


def test_json_schema_and_budgets_file_from_the_cli(tmp_path, capsys):
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('fail_if = ["steps_per_s > +100%"]\n')  # the graph twin is ~9x: broken on purpose
    assert main(["compare", MLP, GRAPH, "--json", "--fail-if", "steps_per_s < -5%", "--budgets", str(budgets)]) == 1
    captured = capsys.readouterr()
    assert "budget broken: steps_per_s > +100%" in captured.err
    out = json.loads(captured.out)
    assert out["schema"] == "diag.compare/1"
    assert set(out) >= {"a", "b", "verdict", "figures", "metrics", "predictions", "environment", "warnings",
                        "gate", "confidence", "seed"}
    for f in out["figures"]:
        assert set(f) >= {"metric", "unit", "a", "b", "a_ci", "b_ci", "change", "change_ci", "word"}
        assert f["word"] in ("faster", "slower", "no detectable change", "not comparable")
    assert [(g["metric"], g["broken"]) for g in out["gate"]] == [("steady.steps_per_s", False),
                                                                  ("steady.steps_per_s", True)]
    env = {e["field"]: e for e in out["environment"]}
    assert env["gpu"]["a"] == "NVIDIA H200" and not env["gpu"]["differs"]
    assert env["command"]["differs"]


def test_same_seed_same_figures(graph_inputs, graph_pair):
    assert cmp.compare(*graph_inputs)["figures"] == graph_pair["figures"]


def test_console_shows_words_and_prediction(graph_pair):
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(build(graph_pair))
    text = console.export_text()
    assert "faster" in text and "inside the bound" in text and "launch.tiny_kernels" in text
    steps = next(f for f in graph_pair["figures"] if f["metric"] == "steady.steps_per_s")
    assert format_value(steps["b"], "per_s") in text  # the one formatter


# -- comparing a run with itself ------------------------------------------------------------------

def test_self_compare_says_no_change_everywhere(self_pair):
    c = self_pair
    kinds = {f["metric"].split(".")[0] + ("/req" if "request" in f["metric"] else "") for f in c["figures"]}
    assert {"steady", "steady/req"} <= kinds  # steps and requests both compared
    assert c["figures"] and all(f["word"] == "no detectable change" for f in c["figures"])
    assert all(m["word"] == "no detectable change" for m in c["metrics"])
    assert not c["verdict"]["moved"] and not c["verdict"]["changed"]
    assert not c["warnings"]
    from diag.views.compare import held_text

    assert all(held_text(p) == "no detectable change" for p in c["predictions"])


def test_queueing_gain_is_on_request_latency(self_pair):
    p = next(p for p in self_pair["predictions"] if p["rule"] == "queue.requests_wait")
    assert p["gain_on"] == "request_latency" and p["realised_from"] == "steady.request_mean_ms"
    assert p["realised"] == pytest.approx(1.0)


# -- statistics -------------------------------------------------------------------------------------

def test_block_length_grows_with_autocorrelation():
    rng = np.random.default_rng(0)
    white = rng.standard_normal(8000)
    walk = np.convolve(white, np.ones(50) / 50, mode="same")  # strongly correlated neighbours
    assert cmp.block_length(white) <= 25
    assert cmp.block_length(walk) > 2 * cmp.block_length(white)


def test_between_run_spread_widens_the_interval():
    one = np.random.default_rng(1).normal(100, 1, 400)
    far = one + 30  # a second run of the same set-up, 30% off
    rng = np.random.default_rng(0)
    lo1, hi1 = cmp.interval(cmp.side_replicates([one], rng))
    lo2, hi2 = cmp.interval(cmp.side_replicates([one, far], rng))
    assert hi2 - lo2 > 5 * (hi1 - lo1)


# -- the gate ---------------------------------------------------------------------------------------

def test_budget_parsing_aliases_and_percent():
    b = parse_budget("request_p99_ms > +10%")
    assert (b.metric, b.op, b.limit, b.relative) == ("steady.request_p99_ms", ">", pytest.approx(0.1), True)
    b = parse_budget("steps_per_s < -5%")
    assert (b.metric, b.op, b.limit) == ("steady.steps_per_s", "<", pytest.approx(-0.05))
    assert parse_budget("steady.gpu_busy < 0.5").relative is False
    assert parse_budget("client_p99_ms > 250").metric == "client.p99_ms"


@pytest.mark.parametrize("text", [
    "", "nonsense_metric > 1%", "__import__('os') > 1", "steps_per_s > 1 and gpu_busy < 2",
    "steps_per_s < 1 or steps_per_s > 2", "steps_per_s == 5%", "steps_per_s > " + "-" * 60 + "1",
    "steps_per_s > 9" * 200, "steps_per_s > 1e300", "steps_per_s.__class__ > 1",
])
def test_bad_budgets_are_one_line_errors(text):
    with pytest.raises(DiagError) as exc:
        parse_budget(text)
    assert exc.value.exit_code == 2 and "\n" not in exc.value.message


def test_gate_needs_the_whole_interval_past_the_budget():
    line = {"metric": "steady.step_p99_ms", "a": 10.0, "b": 12.0, "change": 0.2, "change_ci": [0.05, 0.35],
            "b_ci": [10.5, 13.5]}
    c = {"figures": [line], "metrics": []}
    assert check([parse_budget("step_p99_ms > +3%")], c)[0]["broken"] is True
    assert check([parse_budget("step_p99_ms > +10%")], c)[0]["broken"] is False  # interval straddles it
    assert check([parse_budget("step_p99_ms > 10")], c)[0]["broken"] is True  # B's own value
    with pytest.raises(DiagError):
        check([parse_budget("request_p99_ms > +10%")], c)  # no data for it: bad input, not a pass


def test_bad_budgets_file(tmp_path):
    f = tmp_path / "budgets.toml"
    f.write_text("fail_if = 3\n")
    assert main(["compare", MLP, GRAPH, "--budgets", str(f)]) == 2
    f.write_text("fail_if = [")
    assert main(["compare", MLP, GRAPH, "--budgets", str(f)]) == 2


# -- bad input --------------------------------------------------------------------------------------

def test_missing_run_is_one_line_exit_2(tmp_path, capsys):
    assert main(["compare", MLP, str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no such run" in err


def test_corrupt_run_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "run.json").write_text("{not json")
    assert main(["compare", str(bad), MLP]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("diag:")
    trace = tmp_path / "t.json"
    trace.write_text("garbage")
    assert main(["compare", MLP, str(trace)]) == 2


def test_argument_errors(capsys):
    assert main(["compare", MLP]) == 2
    assert main(["compare", MLP, "--"]) == 2
    assert main(["compare", MLP, GRAPH, "--fail-if", "nope > 1%"]) == 2
    assert "Traceback" not in capsys.readouterr().err


# -- CPU runs recorded here: a real regression fails the gate, noise passes --------------------------

WORKLOAD = textwrap.dedent("""
    import os, sys, time
    import torch
    from torch import nn

    SLEEP = float(os.environ.get("EXTRA_MS", "0")) / 1000

    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(64, 64)

        def forward(self, x):
            if SLEEP:
                time.sleep(SLEEP)  # the injected regression: every call gets slower
            return self.layer(x)

    torch.set_num_threads(1)
    model, x = Scorer().eval(), torch.randn(8, 64)
    end = time.perf_counter() + float(sys.argv[1])
    with torch.inference_mode():
        while time.perf_counter() < end:
            model(x)
            time.sleep(0.002)
""")
GATE = ["--fail-if", "step_p50_ms > +100%", "--fail-if", "steps_per_s < -25%"]


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cpu_runs")
    script = root / "scorer.py"
    script.write_text(WORKLOAD)
    runs = {}
    for name, extra in (("base1", "0"), ("base2", "0"), ("slow", "4")):
        out = root / name
        subprocess.run([sys.executable, "-m", "diag", "profile", "--out", str(out), "--quiet", "--no-stacks",
                        "--no-gpu", "--", sys.executable, str(script), "3"], check=True, timeout=120,
                       env={**os.environ, "EXTRA_MS": extra, "OMP_NUM_THREADS": "1"})
        runs[name] = str(out)
    return runs


@pytest.mark.slow
def test_gate_fails_a_real_regression(cpu_runs, capsys):
    assert main(["compare", cpu_runs["base1"], cpu_runs["slow"], *GATE]) == 1
    captured = capsys.readouterr()
    assert "budget broken" in captured.err and "slower" in captured.out


@pytest.mark.slow
def test_gate_passes_noise_between_two_runs_of_one_program(cpu_runs, capsys):
    assert main(["compare", cpu_runs["base1"], cpu_runs["base2"], *GATE]) == 0
    assert "budget broken" not in capsys.readouterr().err


@pytest.mark.slow
def test_several_runs_per_side_and_directories(cpu_runs, tmp_path, capsys):
    assert main(["compare", cpu_runs["base1"], cpu_runs["base2"], "--", cpu_runs["slow"], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["a"]) == 2 and len(out["b"]) == 1
    p50 = next(f for f in out["figures"] if f["metric"] == "steady.step_p50_ms")
    assert p50["word"] == "slower"
    side = tmp_path / "before"
    side.mkdir()
    for name in ("base1", "base2"):
        os.symlink(cpu_runs[name], side / name)
    assert main(["compare", str(side), cpu_runs["base1"], "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["a"]) == 2


# -- the numeric gain in the Diagnosis --------------------------------------------------------------

RULE = """
[[rule]]
id = "mine.copies"
label = "transfer_bound"
title = "copies"
when = "steady.copy_share >= 0"
evidence = ["steady.copy_share"]

[[rule.recommendation]]
text = "pin"
gain = "limit(0.5)"
predict = "amdahl(0.5, 4)"
expected_gain = "at most {gain:.2f}x"
{extra}
"""


def _rec(extra: str = ""):  # noqa: ANN202 - the first recommendation the rule makes
    from diag.engine.diagnose import evaluate_rule
    from diag.engine.rules import parse_rule_file

    rule = parse_rule_file("mine.toml", RULE.replace("{extra}", extra))[0]
    return evaluate_rule(rule, {"steady.copy_share": 0.3}).recommendations[0]


def test_recommendation_carries_gain_max_and_point():
    r = _rec()
    assert r.gain_max == pytest.approx(2.0) and r.gain_point == pytest.approx(1.6) and r.gain_on == "throughput"
    assert _rec('gain_on = "wall_time"').gain_on == "wall_time"
    with pytest.raises(DiagError, match="gain_on"):
        _rec('gain_on = "vibes"')
    from diag.engine.rules import parse_rule_file

    with pytest.raises(DiagError, match="unknown metric"):
        parse_rule_file("m.toml", RULE.replace("amdahl(0.5, 4)", "steady.nope * 2").replace("{extra}", ""))


# -- load runs (diag load): the client side only ------------------------------------------------------

def _load_run(path, latency_ms: float, seed: int) -> str:
    """A `diag load` run directory: manifest (kind load) and 600 measured requests at 50/s."""
    from diag.store.jsonl import JsonlWriter
    from diag.store.manifest import write_manifest

    os.makedirs(path)
    rng = np.random.default_rng(seed)
    t0 = 1_800_000_000_000_000_000
    w = JsonlWriter(str(path), "load_requests")
    for i in range(600):
        ts = t0 + i * 20_000_000
        ms = float(latency_ms * rng.lognormal(0, 0.2))
        w.write({"ts_ns": ts, "sent_ns": ts, "end_ns": ts + int(ms * 1e6), "latency_ms": ms, "status": 200,
                 "error": None, "bytes": 10, "phase": "measure", "step": 0})
    w.close()
    write_manifest(str(path), {"schema": "diag.run/1", "run_id": f"load{seed}", "kind": "load",
                               "command": ["diag", "load", "http://127.0.0.1:8000/"], "start_ns": t0,
                               "end_ns": t0 + 12_000_000_000, "duration_s": 12.0, "exit_code": 0,
                               "partial": False, "host": {}, "gpu": {}, "versions": {}, "collectors": {},
                               "options": {}, "load": {"stats": {"seconds": 12.0}}}, new=True)
    return str(path)


def test_load_runs_compare_client_side(tmp_path, capsys):
    a = _load_run(tmp_path / "a", 10.0, 1)
    b = _load_run(tmp_path / "b", 14.0, 2)
    a2 = _load_run(tmp_path / "a2", 10.0, 3)
    assert main(["compare", a, b, "--json", "--fail-if", "client_p99_ms > +20%"]) == 1
    out = json.loads(capsys.readouterr().out)
    lines = {f["metric"]: f for f in out["figures"]}
    assert set(lines) == {"client.requests_per_s", *(f"client.p{q}_ms" for q in (50, 90, 95, 99))}
    assert lines["client.p50_ms"]["word"] == "slower" and lines["client.p50_ms"]["change"] == pytest.approx(0.4, abs=0.1)
    assert lines["client.requests_per_s"]["a"] == pytest.approx(50.0)
    assert out["verdict"]["a"]["runs"] == 0 and out["predictions"] == []
    assert main(["compare", a, a2, "--fail-if", "client_p99_ms > +20%"]) == 0  # same service, other draws


def test_imported_traces_compare_like_runs(capsys):
    trace = os.path.join(os.path.dirname(__file__), "data", "traces", "kineto_cuda_synthetic.json")
    assert main(["compare", trace, trace, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"][0]["kind"] == "trace" and out["figures"]
    assert all(f["word"] == "no detectable change" for f in out["figures"])
    assert main(["compare", trace, MLP, "--json"]) == 0  # a trace against a profiled run: warned, compared
    assert any("different kinds of run" in w for w in json.loads(capsys.readouterr().out)["warnings"])
