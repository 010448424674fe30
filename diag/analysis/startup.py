"""Startup and warm-up: how long, what it was spent on, and how much is more than any GPU program pays."""

from __future__ import annotations

import numpy as np
import pandas as pd

from diag.analysis.catalog import Metric
from diag.analysis.columns import as_bool
from diag.analysis.context import complete, num
from diag.analysis.phases import Phases, one_off_shapes
from diag.store.run import Run

# What every program pays before its first step and is not a cold-start
# problem: importing torch and creating the CUDA context take about 4 s on an
# H200 host; importing torch alone about 2 s. When the import was measured, the
# CPU baseline is that import plus a small allowance for the interpreter start
# and argument parsing: anything more is the program's own set-up (building,
# writing or loading models), which a long-lived process pays once.
BASELINE_GPU_S = 4.0
BASELINE_CPU_S = 2.0
CPU_ALLOWANCE_S = 0.3
CUDA_INIT_S = 1.5  # context creation, on top of a measured import

METRICS = [
    Metric("run.duration_s", "s", "Wall time of the whole run."),
    Metric("steady.duration_s", "s", "Length of the steady state."),
    Metric("startup.duration_s", "s", "Process start to the end of the first step (or request)."),
    Metric("startup.share", "ratio", "Startup / run duration."),
    Metric("startup.import_s", "s", "Time importing torch / onnxruntime (hooks)."),
    Metric("startup.model_load_s", "s", "Time loading models (torch.load, ORT session creation) before the first step ended."),
    Metric("startup.first_step_s", "s", "Duration of the first step."),
    Metric("startup.other_s", "s", "Startup not explained by imports, model loading, the first step or diag itself."),
    Metric("startup.diag_s", "s", "Time diag itself took during startup (the profiler's one-time CUPTI init for kernel windows); left out of the excess."),
    Metric("startup.baseline_s", "s", "Startup every program pays: GPU max(4 s, import + 1.5 s CUDA init); CPU import + 0.3 s (2 s unmeasured); less waits for a core."),
    Metric("startup.excess_s", "s", "Startup beyond the baseline."),
    Metric("warmup.duration_s", "s", "Length of the warm-up phase (steps until latency settles)."),
    Metric("warmup.steps", "count", "Steps in the warm-up phase."),
    Metric("warmup.excess_s", "s", "Warm-up beyond the steady step cycle: slow warm-up steps, pre-warm calls and set-up work between them (less run-queue delay)."),
    Metric("coldstart.share", "ratio", "(startup + warm-up excess) / run duration, all less diag's startup, the stepping thread's waits for a core and the startup baseline."),
    Metric("coldstart.excess_s", "s", "Startup excess + warm-up excess, seconds."),
]


def compute(run: Run, phases: Phases, device: str) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    duration = run.duration_s
    out["run.duration_s"] = duration
    out["steady.duration_s"] = phases.steady.duration_s
    if phases.startup is None:  # no process start seen (an imported trace, or no steps)
        return out
    startup = phases.startup.duration_s
    out["startup.duration_s"] = startup
    out["startup.share"] = startup / duration if duration > 0 else None
    ev = run.table("events")
    end = phases.startup.end_ns
    before = ev[ev["ts_ns"] <= end] if not ev.empty else ev
    imp = float(np.nansum(num(before[before["kind"] == "import"]["dur_ns"]))) / 1e9 if not ev.empty else 0.0
    load = float(np.nansum(num(before[before["kind"] == "model_load"]["dur_ns"]))) / 1e9 if not ev.empty else 0.0
    # diag's own kernel-window set-up (CUPTI init: seconds on a GPU) is not the program's
    own = before[before["kind"] == "window"] if not ev.empty else ev
    diag_s = float(np.nansum(num(own["dur_ns"]))) / 1e9 if not ev.empty else 0.0
    out["startup.import_s"] = imp
    out["startup.model_load_s"] = load
    out["startup.diag_s"] = diag_s
    steps = complete(run, "steps")
    first = 0.0
    if not steps.empty:
        first = float(steps["dur_ns"].iloc[0]) / 1e9  # tables are sorted by ts_ns
        out["startup.first_step_s"] = first
    out["startup.other_s"] = max(0.0, startup - imp - load - first - diag_s)
    # A busy host stretches start-up, the import and the run alike: the one-time cost is judged
    # on the time the stepping thread was not queued for a core (schedstat run delay; 0 without it).
    imports = before[before["kind"] == "import"] if not ev.empty else ev
    q_imp = float(_run_delay_ns(run, phases, imports[["ts_ns", "dur_ns"]]).sum()) / 1e9 if len(imports) else 0.0
    q_start = _queued_s(run, phases, run.start_ns, end)
    imp_run, startup_run = max(0.0, imp - q_imp), max(0.0, startup - q_start)
    # a slow filesystem makes every import slow: a measured import raises the baseline
    if device == "cuda":
        base = max(BASELINE_GPU_S, imp_run + CUDA_INIT_S)
    else:
        base = imp_run + CPU_ALLOWANCE_S if imp > 0 else BASELINE_CPU_S
    baseline = min(startup_run, base)
    out["startup.baseline_s"] = baseline
    excess = max(0.0, startup_run - diag_s - baseline)
    out["startup.excess_s"] = excess

    warm_excess = 0.0
    if phases.basis == "steps" and not steps.empty:
        on = (steps["pid"].to_numpy() == phases.main_pid) & (steps["tid"].to_numpy() == phases.main_tid)
        cols = ["ts_ns", "dur_ns", "in_window"] + (["shapes"] if "shapes" in steps.columns else [])
        every = steps[cols][on]
        once = one_off_shapes(every["shapes"]) if "shapes" in every.columns else np.zeros(len(every), bool)
        keep = ~as_bool(every["in_window"])
        mine, once = every[keep], once[keep]
        t0 = phases.steady.start_ns
        steady = num(mine[mine["ts_ns"] >= t0]["dur_ns"])
        med = float(np.nanmedian(steady)) if len(steady) else None
        if med is not None:
            early = (mine["ts_ns"] < t0).to_numpy()  # first step and warm-up steps
            d = num(mine["dur_ns"])
            # a pre-warm call's output is thrown away: all of it is one-time cost
            contrib = np.where(once, d, np.clip(d - med, 0, None))
            contrib -= _run_delay_ns(run, phases, mine)  # waiting for a core warms nothing up
            contrib = np.clip(contrib, 0, None)
            warm_excess = float(contrib[early].sum()) / 1e9
            # the first step's excess is already part of startup
            if len(mine) and int(mine["ts_ns"].iloc[0]) == int(steps["ts_ns"].iloc[0]):
                warm_excess = max(0.0, warm_excess - float(contrib[0]) / 1e9)
            else:
                warm_excess = max(0.0, warm_excess - max(0.0, first * 1e9 - med) / 1e9)
            # Work between warm-up steps (compile, serialize, cache I/O) is one-time cost too: all
            # of the warm-up phase beyond what its steps would take at the steady step cycle
            # (step and the work between steps), less waits for a core.
            warm_excess = max(warm_excess, _warmup_beyond_cycles(run, phases, mine))
    if phases.warmup is not None:
        out["warmup.duration_s"] = phases.warmup.duration_s
        out["warmup.steps"] = float(phases.warmup_steps)
    else:
        out["warmup.duration_s"] = 0.0
        out["warmup.steps"] = 0.0
    out["warmup.excess_s"] = warm_excess
    out["coldstart.excess_s"] = excess + warm_excess
    # Out of the denominator, time no label can act on: diag's own start-up, the waits for a
    # core, and the baseline every such program pays (import, CUDA context). Left in, the
    # baseline would dilute a short job's one-time cost with time that is not its work either.
    neither_s = ((out.get("startup.diag_s") or 0.0) + _queued_s(run, phases, run.start_ns, run.end_ns)
                 + (out.get("startup.baseline_s") or 0.0))
    out["coldstart.share"] = (excess + warm_excess) / (duration - neither_s) if duration - neither_s > 0 else None
    return out


def _warmup_beyond_cycles(run: Run, phases: Phases, steps: pd.DataFrame) -> float:
    """Seconds of the warm-up phase beyond its steps' count times the steady step cycle.

    Waiting for a core (run-queue delay over the warm-up) warms nothing up: taken out.
    """
    if phases.warmup is None or phases.steady.duration_s <= 0:
        return 0.0
    ts = steps["ts_ns"].to_numpy(dtype=np.int64)
    in_steady = int((ts >= phases.steady.start_ns).sum())
    in_warm = int(((ts >= phases.warmup.start_ns) & (ts < phases.warmup.end_ns)).sum())
    if in_steady < 2:
        return 0.0
    # both sides less the stepping thread's waits for a core (they warm nothing up, and a busy
    # host stretches the steady cycle too)
    spans = pd.DataFrame({"ts_ns": [phases.warmup.start_ns, phases.steady.start_ns],
                          "dur_ns": [phases.warmup.end_ns - phases.warmup.start_ns,
                                     phases.steady.end_ns - phases.steady.start_ns]})
    q_warm, q_steady = (float(v) / 1e9 for v in _run_delay_ns(run, phases, spans))
    cycle = max(0.0, phases.steady.duration_s - q_steady) / in_steady  # mean start-to-start of a steady step
    return max(0.0, phases.warmup.duration_s - q_warm - in_warm * cycle)


def _queued_s(run: Run, phases: Phases, a: int, b: int) -> float:
    """Seconds the stepping thread waited for a core between a and b (0 without schedstat)."""
    if b <= a:
        return 0.0
    return float(_run_delay_ns(run, phases, pd.DataFrame({"ts_ns": [a], "dur_ns": [b - a]}))[0]) / 1e9


def _run_delay_ns(run: Run, phases: Phases, steps: pd.DataFrame) -> np.ndarray:
    """Per step: how long the stepping thread sat in the run queue during it (schedstat run delay).

    A step that is slow because another process held the cores did not warm anything up.
    """
    out = np.zeros(len(steps))
    th = run.table("threads")
    if th.empty or "run_delay_s" not in th.columns or not len(steps):
        return out
    th = th[(th["pid"] == phases.main_pid) & (th["tid"] == phases.main_tid)]
    ts = th["ts_ns"].to_numpy(dtype=np.int64)
    v = num(th["run_delay_s"])
    ok = ~np.isnan(v)
    ts, v = ts[ok], v[ok]
    if len(ts) < 2:
        return out
    order = np.argsort(ts, kind="stable")
    ts, v = ts[order], np.maximum.accumulate(v[order])  # cumulative counter, forward-filled
    a = steps["ts_ns"].to_numpy(dtype=np.int64)
    b = a + steps["dur_ns"].to_numpy(dtype=np.int64)
    # the counter at a time: linear between samples (samples are ~100 ms apart, steps can be shorter)
    return np.clip(np.interp(b, ts, v) - np.interp(a, ts, v), 0, None) * 1e9
