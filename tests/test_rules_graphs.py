"""A program that already replays CUDA graphs or runs torch.compile is judged on what still holds it back.

Synthetic H200 runs (tests/analysis_fixtures.py) of one launch-bound ranker
loop: plain, replaying a hand-captured graph, compiled with reduce-overhead,
compiled in the default mode with graph breaks and recompilations.
"""

from __future__ import annotations

from pathlib import Path

import analysis_fixtures as F

from diag.engine import diagnose

DATA = Path(__file__).parent / "data"
GRAPH_ADVICE = ("Replay the step as one CUDA graph", "capture the step with CUDA graphs")
REDUCE_OVERHEAD = 'torch.compile(model, mode="reduce-overhead")'


def launch_loop(path: str, *, inside: float = 0.97, replays: bool = False, gap_us: float = 12.0,
                compile_mode: str | None = None, dynamo: dict | None = None):
    """gpu_launch's loop (batch 1, 120 kernels of 4 us per step), optionally with graphs / compile facts."""
    b = F.RunBuilder(path, gpu=True)
    steps = F._loop(b, 0.002, inside, batch=1, shapes="[[1,64]]")
    b.thread_cpu(0.97)
    b.host(100)
    b.gpu_samples(25, from_s=F.STARTUP_S)
    for w, k in ((0, 200), (1, 800)):
        kernels = []
        for s in range(3):
            t = steps[k + s][0]
            kernels += [(t + j * (4 + gap_us) * 1e-6, 4e-6, "elementwise") for j in range(120)]
        b.kernel_window(w, steps[k][0], 3, kernels)
    if replays:  # by hand: after warm-up every step is an outermost replay
        for row in b.rows["steps"][3:]:
            row["source"], row["model"] = "cuda_graph", "Ranker"
        b.event("cuda_graph", 4.4, 0.05, "capture", {"n": 1})
        b.event("cuda_graph", b.duration_s - 0.01, 0, "summary",
                {"captured": 1, "replays": len(steps) - 3, "replay_steps": len(steps) - 3})
    if compile_mode is not None:
        b.event("compile", 4.0, 0, "torch.compile", {"mode": compile_mode, "backend": "inductor"})
        b.event("compile", b.duration_s - 0.01, 0, "summary", {"compile_s": 12.0, **(dynamo or {})})
        if compile_mode == "reduce-overhead":  # cudagraph trees: replays nested in the compiled call
            b.event("cuda_graph", b.duration_s - 0.01, 0, "summary",
                    {"captured": 1, "replays": len(steps) - 2, "replay_steps": 0})
    return b.write()


def advice(d) -> str:
    return "\n".join(r.text + "\n" + r.code for f in d.findings for r in f.recommendations)


def test_plain_launch_bound_loop_is_told_to_use_graphs(tmp_path) -> None:
    d = diagnose(launch_loop(str(tmp_path / "run")))
    assert d.primary == "launch_bound"
    assert d.metrics["run.cuda_graphs"] == 0 and d.metrics["run.compiled"] == 0
    assert GRAPH_ADVICE[0] in advice(d) and REDUCE_OVERHEAD in advice(d)


def test_graph_replays_get_what_still_holds_them_back(tmp_path) -> None:
    # the replay is short; the host works between replays (.item(), input copies) 60% of the time
    d = diagnose(launch_loop(str(tmp_path / "run"), inside=0.4, replays=True, gap_us=1.0))
    m = d.metrics
    assert m["run.cuda_graphs"] == 1 and m["run.graphs_captured"] == 1
    assert m["steady.cuda_graph_steps_share"] > 0.999
    assert m["steady.steps"] > 1000  # replays are the steps: the steady state is not 3 warm-up calls
    text = advice(d)
    assert not any(a in text for a in GRAPH_ADVICE) and REDUCE_OVERHEAD not in text
    fired = {f.rule for f in d.findings}
    assert {"graphs.host_between_replays", "graphs.small_work_per_replay"} <= fired
    assert "static_x.copy_(next_x_pinned, non_blocking=True)" in text  # host work between replays
    assert "larger fixed batch" in text                                # a batch too small for the GPU


def test_reduce_overhead_is_not_told_to_use_reduce_overhead(tmp_path) -> None:
    d = diagnose(launch_loop(str(tmp_path / "run"), compile_mode="reduce-overhead",
                             dynamo={"graph_breaks": 0, "recompiles": 0}))
    m = d.metrics
    assert m["run.compiled"] == 1 and m["run.cuda_graphs"] == 1 and m["steady.cuda_graph_steps_share"] > 0.99
    text = advice(d)
    assert not any(a in text for a in GRAPH_ADVICE) and REDUCE_OVERHEAD not in text
    assert "graphs.compiled_call_overhead" in {f.rule for f in d.findings}  # guards and dispatch, with evidence
    assert "skip_guard_eval_unsafe" in text


def test_default_mode_with_breaks_and_recompiles(tmp_path) -> None:
    d = diagnose(launch_loop(str(tmp_path / "run"), compile_mode="default",
                             dynamo={"graph_breaks": 3, "recompiles": 5}))
    m = d.metrics
    assert m["run.compiled"] == 1 and m["run.cuda_graphs"] == 0
    assert m["run.graph_breaks"] == 3 and m["run.recompiles"] == 5 and m["coldstart.compile_s"] == 12
    text = advice(d)
    assert GRAPH_ADVICE[0] not in text                 # not "compile it": it is compiled
    assert "instead of the default mode" in text       # but switch the mode
    fired = {f.rule for f in d.findings}
    assert {"graphs.graph_breaks", "graphs.recompiles"} <= fired


def _advice(d) -> str:  # noqa: ANN001
    return " ".join(r.text + " " + (r.code or "") for f in d.findings for r in f.recommendations)


def test_recorded_h200_graph_replays_are_steps_and_not_told_to_use_graphs() -> None:
    """sample_workloads/ranker_graph.py, 8 s on the H200 under diag profile (cupti windows)."""
    from diag.store.run import open_run

    d = diagnose(open_run(str(DATA / "gpu" / "ranker_graph")))
    assert d.metrics["run.cuda_graphs"] == 1 and d.metrics["steady.steps"] > 10_000  # replays, not 3 warm-ups
    assert d.primary == "launch_bound" and "graphs.small_work_per_replay" in [f.rule for f in d.findings]
    assert not any(a in _advice(d) for a in GRAPH_ADVICE)


def test_recorded_h200_compiled_run_has_no_graph_break_from_diag() -> None:
    """ranker_compiled.py (reduce-overhead) on the H200: diag's hooks add no graph break, advice knows it."""
    from diag.store.run import open_run

    d = diagnose(open_run(str(DATA / "gpu" / "ranker_compiled")))
    assert d.metrics["run.compiled"] == 1 and d.metrics["run.cuda_graphs"] == 1
    assert d.metrics["run.graph_breaks"] == 0
    assert REDUCE_OVERHEAD not in _advice(d) and not any(a in _advice(d) for a in GRAPH_ADVICE)


def test_recorded_h200_large_graph_replays_are_judged_on_their_math() -> None:
    """ranker_graph.py --large on the H200: ms-long replays are steps; no graph advice, the fp32 math is named."""
    from diag.store.run import open_run

    d = diagnose(open_run(str(DATA / "gpu_variants" / "ranker_graph_large")))
    assert d.metrics["run.cuda_graphs"] == 1 and d.metrics["steady.steps"] > 1000
    assert d.primary == "compute_bound" and not any(a in _advice(d) for a in GRAPH_ADVICE)


def test_recorded_h200_default_mode_compile_is_told_reduce_overhead_not_to_compile() -> None:
    """ranker_compiled.py --mode default, 8 s on the H200: compiled, no graphs; advice is the mode it lacks."""
    from diag.store.run import open_run

    d = diagnose(open_run(str(DATA / "gpu_variants" / "ranker_compiled_default")))
    assert d.metrics["run.compiled"] == 1 and d.metrics["run.cuda_graphs"] == 0
    assert d.metrics["run.graph_breaks"] == 0 and d.metrics["steady.steps"] > 1000
    # 27 s of compile in a 50 s run: launch-bound steps and a cold start both hold, close (0.65 / 0.58)
    assert {d.primary, d.runner_up} == {"launch_bound", "cold_start"} and "reduce-overhead" in _advice(d)
    assert "graphs.compiled_call_overhead" in [f.rule for f in d.findings]
