"""Shared helpers for the TUI tests: runs on disk, canned diagnoses, an app in one line.

Holds no tests itself. To add a fixture run (e.g. the recorded H200 run), put
its directory under tests/data/ and add it to RECORDED: the snapshot
tests pick it up. Keep `diag analyze RUN --json > RUN/tui_diagnosis.json` beside
it so its snapshots show a fixed diagnosis; without it the engine diagnoses it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Callable, Coroutine
from typing import Any

from diag.engine.diagnosis import Diagnosis, Evidence, Finding, Phase, Recommendation
from diag.store.run import open_run
from diag.synthetic import write_synthetic_run
from diag.tui import make_app
from diag.tui.app import DiagApp
from diag.tui.source import RunSource

DATA = os.path.join(os.path.dirname(__file__), "data")
SYNTHETIC = ("gpu_compute", "cpu_preprocess")
# fixture name -> recorded run directory under tests/data/
RECORDED: dict[str, str] = {"h200_encoder": "gpu/encoder_batch", "h200_server": "gpu/encoder_server"}
FIXTURES = SYNTHETIC + tuple(name for name, path in RECORDED.items() if os.path.isdir(os.path.join(DATA, path)))
SIZE = (100, 30)


def canned_diagnosis(scenario: str) -> Diagnosis:
    """A hand-built Diagnosis for a synthetic scenario: fixed, so snapshots stay stable."""
    phases = [Phase("startup", 0.0, 4.5), Phase("warmup", 4.5, 6.0), Phase("steady", 6.0, 20.0)]
    if scenario == "gpu_compute":
        scores = {"compute_bound": 0.82, "memory_bound": 0.18, "transfer_bound": 0.25, "launch_bound": 0.05,
                  "cpu_bound": 0.3, "cold_start": 0.22}
        metrics = {"steady.gpu_busy": 0.86, "steady.tensor_active": 0.55, "steady.sm_active": 0.78,
                   "steady.dram_bw_util": 0.25, "steady.inside_model_share": 0.6,
                   "steady.outside_busy_share": 0.4, "steady.copy_share": 0.08, "steady.step_p50_ms": 3.1,
                   "steady.throughput": 198.5}
        findings = [
            Finding("gpu.compute_saturated", "compute_bound", "high", "Tensor cores are busy most of the time",
                    0.82, [Evidence("steady.tensor_active", 0.55, "ratio", "> 0.4"),
                           Evidence("steady.sm_active", 0.78, "ratio", "> 0.6")],
                    [Recommendation("Use a fused attention kernel and bf16 everywhere.",
                                    "model = torch.compile(model, mode=\"max-autotune\")", "up to 1.3x")]),
            Finding("copy.pageable_h2d", "transfer_bound", "medium", "Inputs are copied from pageable memory",
                    0.25, [Evidence("steady.copy_share", 0.08, "ratio", "> 0.05")],
                    [Recommendation("Pin the host buffers and copy without blocking.",
                                    "x = x.pin_memory().to(\"cuda\", non_blocking=True)", "up to 8%")]),
            Finding("startup.slow_import", "cold_start", "low", "Startup takes 4.5 s before the first step",
                    0.22, [Evidence("startup.duration", 4.5, "s", "> 3")], []),
        ]
        units = {"steady.step_p50_ms": "ms", "steady.throughput": "steps/s"}
    else:
        scores = {"cpu_bound": 0.74, "io_bound": 0.12, "cold_start": 0.2}
        metrics = {"steady.inside_model_share": 0.3, "steady.outside_busy_share": 0.7,
                   "steady.cpu_busy": 1.4, "steady.step_p50_ms": 1.5}
        findings = [
            Finding("cpu.preprocess_starves_model", "cpu_bound", "high",
                    "70% of the stepping thread's time is spent outside the model", 0.74,
                    [Evidence("steady.outside_model_share", 0.7, "ratio", "> 0.5")],
                    [Recommendation("Move tokenization to DataLoader workers.",
                                    "loader = DataLoader(ds, num_workers=4, pin_memory=True)", "up to 2.3x")]),
            Finding("gpu.none", None, "info", "No GPU data: NVML driver not loaded", 0.0, [], []),
        ]
        units = {"steady.step_p50_ms": "ms", "steady.cpu_busy": "cores"}
    for m in list(metrics):
        units.setdefault(m, "ratio")
    primary = max(scores, key=scores.get)
    return Diagnosis(run={"command": ["python", "serve.py"]}, primary=primary, scores=scores, phases=phases,
                     findings=findings, metrics=metrics, units=units)




def write_tui_runs(root: str) -> dict[str, str]:
    """Run directories by fixture name: the synthetic ones written under `root`, the recorded ones in place."""
    runs = {name: write_synthetic_run(os.path.join(root, name), 20.0, name) for name in SYNTHETIC}
    runs.update({name: os.path.join(DATA, RECORDED[name]) for name in FIXTURES if name not in runs})
    return runs


def fixture_diagnosis(runs: dict[str, str], name: str) -> Diagnosis | None:
    """The fixed Diagnosis for a fixture: canned for synthetic runs; for a recorded run its
    `tui_diagnosis.json` (a `diag analyze RUN --json` output) if kept, else None (the engine runs)."""
    if name in SYNTHETIC:
        return canned_diagnosis(name)
    saved = os.path.join(runs[name], "tui_diagnosis.json")
    if os.path.exists(saved):
        with open(saved) as f:
            return Diagnosis.from_json(json.load(f))
    return None


def app_for(runs: dict[str, str], name: str) -> DiagApp:
    """The app on fixture `name`, with its fixed diagnosis so snapshots do not follow rule changes."""
    run = open_run(runs[name])
    app = make_app(RunSource(run, fixture_diagnosis(runs, name)))
    app.animation_level = "none"  # tab underline animations only slow the tests down
    return app


async def wait_loaded(pilot, timeout_s: float = 10.0) -> None:  # noqa: ANN001
    """Wait until the current view has loaded and shown its data, and the screen has settled."""
    app = pilot.app
    for _ in range(int(timeout_s / 0.02)):
        await pilot.pause()
        if app.current_view().ready:
            break
        await pilot.pause(0.02)
    else:
        raise AssertionError(f"{app.current_view().TITLE} did not load in {timeout_s} s")
    await pilot.pause()


def sync(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test with asyncio.run (no pytest async plugin is installed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper
