"""Before/after comparison of runs (`diag compare A B`): pure functions, plain data out.

Each side is one or more runs of one set-up. For every throughput and latency
figure (steps, requests, the load generator's client side) a side gets a
confidence interval from a moving-block bootstrap over each run's steady-state
samples in time order (blocks keep neighbouring, correlated samples together;
fixed seed, so the same runs always give the same figures). With several runs
per side the bootstrap is two-level: each replicate first draws runs with
replacement, then one replicate of each drawn run, so the interval widens by the
spread between runs, which on a GPU box is often larger than a run's own noise.

The change B/A - 1 gets its interval from the replicates of both sides, and one
word: faster / slower / no detectable change (the interval lies wholly on one
side of zero, or not). Key diagnosis metrics use the spread between runs where a
side has several, else a fixed noise floor (`NOISE_FLOOR`).

Diagnoses come in as their JSON (schema diag.diagnosis/1): analysis sits below
the engine and never imports it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from diag.analysis.columns import weights
from diag.analysis.context import Context
from diag.analysis.latency import PERCENTILES, latencies
from diag.analysis.phases import compute_phases
from diag.store.run import Run

SCHEMA = "diag.compare/1"
SEED = 20260101
REPLICATES = 400
CONFIDENCE = 0.95
MIN_SAMPLES = 5  # fewer samples than this on a side: no interval, no word
BATCH = 50  # replicates resampled at once (memory: BATCH x samples floats)

# The figures with a bootstrap interval: (name, kind of sample, statistic, unit).
FIGURES: tuple[tuple[str, str, str, str], ...] = (
    ("steady.steps_per_s", "step", "per_s", "per_s"),
    *((f"steady.step_p{q}_ms", "step", f"p{q}", "ms") for q in PERCENTILES),
    ("steady.requests_per_s", "request", "per_s", "per_s"),
    *((f"steady.request_p{q}_ms", "request", f"p{q}", "ms") for q in PERCENTILES),
    ("client.requests_per_s", "client", "per_s", "per_s"),
    *((f"client.p{q}_ms", "client", f"p{q}", "ms") for q in PERCENTILES),
)
# Means, for realised latency gains (not shown as lines of their own).
MEANS = {"step": "steady.step_mean_ms", "request": "steady.request_mean_ms", "client": "client.mean_ms"}
FIGURE_NAMES = tuple(f[0] for f in FIGURES)

# Diagnosis metrics worth a line when they move: (name, which way is better or "" for neither).
KEY_METRICS: tuple[tuple[str, str], ...] = (
    ("steady.gpu_busy", ""), ("steady.sm_active", ""), ("steady.copy_share", "lower"),
    ("steady.kernels_per_step", "lower"), ("steady.inside_model_share", ""),
    ("steady.outside_busy_share", "lower"), ("steady.io_wait_share", "lower"), ("steady.gc_share", "lower"),
    ("steady.step_thread_cpu", ""), ("steady.samples_per_s", "higher"), ("steady.batch_p50", ""),
    ("steady.queue_wait_p50_ms", "lower"), ("steady.queue_wait_p90_ms", "lower"),
    ("steady.queue_wait_share", "lower"), ("startup.first_step_s", "lower"), ("startup.model_load_s", "lower"),
    ("coldstart.excess_s", "lower"), ("coldstart.share", "lower"),
)
# Noise of a key metric seen in one run per side: a ratio must move by 3 points, anything else by 10%.
NOISE_FLOOR = {"ratio": 0.03, "relative": 0.10}
SCORE_MOVED = 0.1  # a label score that moved this much is named under "what moved"

NO_CHANGE = "no detectable change"


@dataclass
class RunInput:
    """One run to compare: where it came from, the Run, and its diagnosis JSON (None for a load run)."""

    path: str
    run: Run
    diagnosis: dict[str, Any] | None


@dataclass
class Sample:
    """One kind of call of one run, in time order: latencies (ms, with weights) and completions per bin."""

    ms: np.ndarray
    weight: np.ndarray
    counts: np.ndarray  # weighted calls per equal time bin of the window
    seconds: float
    summary: dict[str, float | None]  # the latency module's own percentiles (point estimates)

    @property
    def per_s(self) -> float | None:
        return float(self.counts.sum()) / self.seconds if self.seconds > 0 else None


def is_load_run(run: Run) -> bool:
    """A `diag load` run: client-side rows only, nothing to diagnose."""
    return run.manifest.get("kind") == "load"


# -- samples ---------------------------------------------------------------------------------------

def run_samples(run: Run) -> dict[str, Sample]:
    """The step, request and load-client samples of a run's steady state (kinds with no rows left out)."""
    out: dict[str, Sample] = {}
    if not is_load_run(run):
        phases = compute_phases(run)
        ctx = Context(run, phases, phases.steady)
        lat = latencies(ctx)  # the one latency computation: steady state, profiled steps left out
        seconds = ctx.seconds
        calls = {"step": ctx.steps(cols=["ts_ns", "weight"]), "request": ctx.requests()}
        for kind, df in calls.items():
            if df.empty or seconds <= 0:
                continue
            ts = (df["ts_ns"].to_numpy(dtype=np.int64) - ctx.t0) / 1e9
            summary = lat[kind].summary()
            out[kind] = Sample(lat[kind].ms, lat[kind].weight, _bin_counts(ts, weights(df), seconds), seconds,
                               summary)
    client = _client_sample(run)
    if client is not None:
        out["client"] = client
    return out


def _bin_counts(ts_s: np.ndarray, w: np.ndarray, seconds: float) -> np.ndarray:
    """Weighted calls per equal time bin: about 20 calls a bin, 10 to 200 bins."""
    n_bins = int(min(200, max(10, len(ts_s) // 20)))
    idx = np.clip((ts_s / seconds * n_bins).astype(int), 0, n_bins - 1)
    return np.bincount(idx, weights=w, minlength=n_bins).astype(float)


def _client_sample(run: Run) -> Sample | None:
    """The load generator's successful requests of its measured phase, by due time."""
    df = run.table("load_requests")
    if df.empty or "latency_ms" not in df.columns:
        return None
    df = df[(df["phase"] == "measure") & df["error"].isna()].sort_values("ts_ns", kind="stable")
    ms = df["latency_ms"].to_numpy(dtype=float)
    ok = ~np.isnan(ms)
    df, ms = df[ok], ms[ok]
    if not len(ms):
        return None
    ts = df["ts_ns"].to_numpy(dtype=np.int64)
    stats = (run.manifest.get("load") or {}).get("stats") or {}
    seconds = stats.get("seconds")
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        seconds = max((int(ts[-1]) - int(ts[0])) / 1e9, 1e-3)
    w = np.ones(len(ms))
    rel = (ts - ts[0]) / 1e9 * (seconds / max((int(ts[-1]) - int(ts[0])) / 1e9, seconds))
    summary = {"count": float(len(ms)), "mean_ms": float(ms.mean()),
               **{f"p{q}_ms": float(np.percentile(ms, q)) for q in PERCENTILES}, "max_ms": float(ms.max())}
    return Sample(ms, w, _bin_counts(rel, w, seconds), float(seconds), summary)


# -- bootstrap -------------------------------------------------------------------------------------

def block_length(x: np.ndarray) -> int:
    """Moving-block length: n^(1/3), longer when neighbouring samples are correlated (lag-1)."""
    n = len(x)
    if n < 4:
        return 1
    d = x - x.mean()
    var = float((d * d).sum())
    rho = float((d[1:] * d[:-1]).sum()) / var if var > 0 else 0.0
    rho = min(max(rho, 0.0), 0.8)
    return int(min(max(1, round(n ** (1 / 3) * (1 + rho) / (1 - rho))), max(1, n // 4)))


def _block_indices(n: int, block: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """reps x n indices of a moving-block bootstrap (blocks of `block` consecutive samples)."""
    per = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(reps, per))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(reps, per * block)
    return idx[:, :n]


def sample_replicates(sample: Sample, rng: np.random.Generator, reps: int = REPLICATES) -> dict[str, np.ndarray]:
    """Bootstrap replicates of one run's statistics: per_s, mean and the latency percentiles."""
    out: dict[str, list[np.ndarray]] = {"per_s": [], "mean": [], **{f"p{q}": [] for q in PERCENTILES}}
    n = len(sample.ms)
    lat_block = block_length(sample.ms) if n else 1
    cnt_block = block_length(sample.counts)
    same_weight = n > 0 and bool(np.all(sample.weight == sample.weight[0]))
    width = sample.seconds / len(sample.counts)
    for start in range(0, reps, BATCH):
        k = min(BATCH, reps - start)
        ci = _block_indices(len(sample.counts), cnt_block, k, rng)
        out["per_s"].append(sample.counts[ci].mean(axis=1) / width)
        if n < MIN_SAMPLES:
            continue
        li = _block_indices(n, lat_block, k, rng)
        v, w = sample.ms[li], sample.weight[li]
        out["mean"].append((v * w).sum(axis=1) / w.sum(axis=1))
        if same_weight:
            pct = np.percentile(v, PERCENTILES, axis=1)
            for q, row in zip(PERCENTILES, pct, strict=True):
                out[f"p{q}"].append(row)
        else:
            for q in PERCENTILES:
                out[f"p{q}"].append(np.array([_wpct(v[i], w[i], q) for i in range(k)]))
    return {k: np.concatenate(v) for k, v in out.items() if v}


def _wpct(v: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(v, kind="stable")
    cw = np.cumsum(w[order])
    return float(v[order][min(int(np.searchsorted(cw, q / 100.0 * cw[-1])), len(v) - 1)])


def side_replicates(per_run: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """A side's replicates: each draws its runs with replacement, then one replicate of each, and averages."""
    if len(per_run) == 1:
        return per_run[0]
    stacked = np.vstack(per_run)  # runs x reps
    k, reps = stacked.shape
    chosen = rng.integers(0, k, size=(reps, k))
    return stacked[chosen, np.arange(reps)[:, None]].mean(axis=1)


def interval(x: np.ndarray) -> tuple[float, float]:
    """The central CONFIDENCE interval of replicates."""
    a = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(x, [a, 100 - a])
    return float(lo), float(hi)


# -- one line of the comparison ----------------------------------------------------------------------

def _line(name: str, unit: str, better: str, a: float | None, b: float | None,
          ra: np.ndarray | None, rb: np.ndarray | None, noise: str = "bootstrap") -> dict[str, Any]:
    """A figure on both sides, its relative change with an interval, and the word for it."""
    line: dict[str, Any] = {"metric": name, "unit": unit, "better": better, "a": _r(a), "b": _r(b),
                            "a_ci": None, "b_ci": None, "change": None, "change_ci": None, "noise": noise,
                            "word": NO_CHANGE}
    if a is None or b is None:
        line["word"] = "not comparable" if a is not None or b is not None else NO_CHANGE
        return line
    if a != 0:
        line["change"] = _r(b / a - 1)
    if ra is not None and rb is not None and len(ra) and len(rb):
        line["a_ci"], line["b_ci"] = _ri(interval(ra)), _ri(interval(rb))
        if a != 0 and np.all(ra != 0):
            n = min(len(ra), len(rb))
            line["change_ci"] = _ri(interval(rb[:n] / ra[:n] - 1))
    elif a == b:
        line["change_ci"] = [0.0, 0.0] if a != 0 else None
    line["word"] = _word(line, better)
    return line


def _word(line: dict[str, Any], better: str) -> str:
    ci = line["change_ci"]
    if ci is None:
        return NO_CHANGE
    lo, hi = ci
    if lo <= 0 <= hi:
        return NO_CHANGE
    up = lo > 0
    if better == "faster_if_higher":
        return "faster" if up else "slower"
    if better == "faster_if_lower":
        return "slower" if up else "faster"
    return "higher" if up else "lower"


def _r(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), 6)


def _ri(ci: tuple[float, float]) -> list[float]:
    return [round(ci[0], 6), round(ci[1], 6)]


# -- the whole comparison ----------------------------------------------------------------------------

def compare(a: Sequence[RunInput], b: Sequence[RunInput], seed: int = SEED) -> dict[str, Any]:
    """The comparison of side A (before) with side B (after), as one JSON-able dict (schema diag.compare/1)."""
    rng = np.random.default_rng(seed)
    sides = {"a": list(a), "b": list(b)}
    samples = {s: [run_samples(r.run) for r in runs] for s, runs in sides.items()}
    reps = {s: [{kind: sample_replicates(sm, rng) for kind, sm in per.items()} for per in samples[s]]
            for s in sides}
    figures, means = [], {}
    for name, kind, stat, unit in (*FIGURES, *((m, k, "mean", "ms") for k, m in MEANS.items())):
        point: dict[str, float | None] = {}
        rep: dict[str, np.ndarray | None] = {}
        for s in sides:
            have = [(sm.get(kind), rp.get(kind, {}).get(stat)) for sm, rp in zip(samples[s], reps[s], strict=True)]
            values = [_point(sm, stat) for sm, _ in have if sm is not None]
            full = bool(have) and len(values) == len(have) and all(v is not None for v in values)
            point[s] = float(np.mean(values)) if full else None
            rep[s] = side_replicates([r for _, r in have], rng) if full and all(
                r is not None for _, r in have) else None
        if point["a"] is None and point["b"] is None:
            continue
        better = "faster_if_higher" if stat == "per_s" else "faster_if_lower"
        line = _line(name, unit, better, point["a"], point["b"], rep["a"], rep["b"])
        (means.__setitem__(name, line) if stat == "mean" else figures.append(line))
    diag_a = [r.diagnosis for r in sides["a"] if r.diagnosis]
    diag_b = [r.diagnosis for r in sides["b"] if r.diagnosis]
    by_name = {f["metric"]: f for f in figures} | means
    return {
        "schema": SCHEMA,
        "a": [_run_summary(r) for r in sides["a"]],
        "b": [_run_summary(r) for r in sides["b"]],
        "confidence": CONFIDENCE, "replicates": REPLICATES, "seed": seed,
        "verdict": verdict(diag_a, diag_b),
        "figures": figures,
        "metrics": key_metrics(diag_a, diag_b, rng),
        "predictions": predictions(diag_a, by_name, sides),
        "environment": environment(sides["a"], sides["b"]),
        "warnings": warnings(sides["a"], sides["b"]),
    }


def _point(sm: Sample, stat: str) -> float | None:
    if stat == "per_s":
        return sm.per_s
    return sm.summary.get(f"{stat}_ms")


def _run_summary(r: RunInput) -> dict[str, Any]:
    m = r.run.manifest
    return {"path": r.path, "run_id": m.get("run_id"), "command": m.get("command") or [],
            "kind": "load" if is_load_run(r.run) else "trace" if m.get("imported_from") else "profile",
            "primary": (r.diagnosis or {}).get("primary")}


def verdict(da: list[dict[str, Any]], db: list[dict[str, Any]]) -> dict[str, Any]:
    """Each side's primary label (the most common among its runs) and mean scores, and what moved."""
    out: dict[str, Any] = {"a": _side_verdict(da), "b": _side_verdict(db), "moved": []}
    sa, sb = out["a"]["scores"], out["b"]["scores"]
    for label in sa.keys() | sb.keys():
        d = (sb.get(label) or 0.0) - (sa.get(label) or 0.0)
        if abs(d) >= SCORE_MOVED:
            out["moved"].append({"label": label, "a": sa.get(label), "b": sb.get(label), "delta": round(d, 3)})
    out["moved"].sort(key=lambda m: -abs(m["delta"]))
    out["changed"] = out["a"]["primary"] != out["b"]["primary"]
    return out


def _side_verdict(ds: list[dict[str, Any]]) -> dict[str, Any]:
    if not ds:
        return {"primary": None, "scores": {}, "runs": 0, "title": ""}
    primaries = [d.get("primary") for d in ds]
    primary = max(dict.fromkeys(primaries), key=primaries.count)
    labels = ds[0].get("scores", {}).keys()
    scores = {lb: round(float(np.mean([d.get("scores", {}).get(lb) or 0.0 for d in ds])), 3) for lb in labels}
    top = next((f for d in ds if d.get("primary") == primary for f in d.get("findings", [])
                if f.get("label") == primary), None)
    return {"primary": primary, "scores": scores, "runs": len(ds), "title": (top or {}).get("title", ""),
            "agree": len(set(primaries)) == 1}


def key_metrics(da: list[dict[str, Any]], db: list[dict[str, Any]], rng: np.random.Generator) -> list[dict[str, Any]]:
    """Key diagnosis metrics on both sides; `word` says whether each moved beyond its noise."""
    out = []
    for name, better in KEY_METRICS:
        va = [d["metrics"].get(name) for d in da if d.get("metrics", {}).get(name) is not None]
        vb = [d["metrics"].get(name) for d in db if d.get("metrics", {}).get(name) is not None]
        if not va and not vb:
            continue
        unit = ((da or db)[0].get("units") or {}).get(name, "")
        a = float(np.mean(va)) if va else None
        b = float(np.mean(vb)) if vb else None
        how = "faster_if_lower" if better == "lower" else "faster_if_higher" if better == "higher" else ""
        if va and vb and len(va) > 1 and len(vb) > 1:
            ra = side_replicates([np.full(REPLICATES, v) for v in va], rng)
            rb = side_replicates([np.full(REPLICATES, v) for v in vb], rng)
            line = _line(name, unit, how, a, b, ra, rb, noise="between runs")
            if line["change_ci"] is None and a is not None and b is not None:  # a is 0: absolute spread
                line["word"] = _floor_word(a, b, unit, how)
        else:
            line = _line(name, unit, how, a, b, None, None, noise="floor")
            if a is not None and b is not None:
                _floor_interval(line, a, b, unit)
                line["word"] = _word(line, how) if line["change_ci"] else _floor_word(a, b, unit, how)
        line["word"] = {"faster": "better", "slower": "worse"}.get(line["word"], line["word"])
        out.append(line)
    return out


def _noise(v: float, unit: str) -> float:
    return NOISE_FLOOR["ratio"] if unit == "ratio" else NOISE_FLOOR["relative"] * abs(v)


def _floor_interval(line: dict[str, Any], a: float, b: float, unit: str) -> None:
    """Intervals of a metric seen once per side: its value give or take the noise floor."""
    da, db = _noise(a, unit), _noise(b, unit)
    # the key metrics are shares, counts and times: never below 0
    a_lo, b_lo = max(0.0, a - da) if a >= 0 else a - da, max(0.0, b - db) if b >= 0 else b - db
    line["a_ci"], line["b_ci"] = [_r(a_lo), _r(a + da)], [_r(b_lo), _r(b + db)]
    if a_lo > 0:
        line["change_ci"] = [_r(b_lo / (a + da) - 1), _r((b + db) / a_lo - 1)]


def _floor_word(a: float, b: float, unit: str, better: str) -> str:
    moved = abs(b - a) > NOISE_FLOOR["ratio"] if unit == "ratio" else \
        abs(b - a) > NOISE_FLOOR["relative"] * max(abs(a), abs(b))
    if not moved:
        return NO_CHANGE
    up = b > a
    if better == "faster_if_higher":
        return "better" if up else "worse"
    if better == "faster_if_lower":
        return "worse" if up else "better"
    return "higher" if up else "lower"


# -- predicted vs realised ---------------------------------------------------------------------------

POINT_TOLERANCE = 0.25  # a point prediction holds when the realised gain is within 25% of it


def realised_gain(on: str, figures: dict[str, dict[str, Any]], sides: dict[str, list[RunInput]]) -> dict[str, Any]:
    """The measured speed-up factor for what a gain speaks of (throughput, request latency, wall time)."""
    if on == "wall_time":
        da = [r.run.duration_s for r in sides["a"]]
        db = [r.run.duration_s for r in sides["b"]]
        a, b = float(np.mean(da)), float(np.mean(db))
        return {"factor": _r(a / b) if b > 0 else None, "ci": None, "from": "run.duration_s"}
    if on == "request_latency":
        names = [MEANS["request"], MEANS["client"], MEANS["step"]]
        invert = True
    else:
        names = ["steady.requests_per_s", "client.requests_per_s", "steady.steps_per_s"]
        invert = False
    line = next((figures[n] for n in names if n in figures and figures[n]["change"] is not None), None)
    if line is None:
        return {"factor": None, "ci": None, "from": None}
    ci = line["change_ci"]
    if invert:  # latency a/b = 1 / (1 + change)
        factor = 1 / (1 + line["change"]) if line["change"] > -1 else None
        ci = [1 / (1 + ci[1]), 1 / (1 + ci[0])] if ci and ci[0] > -1 else None
    else:
        factor = 1 + line["change"]
        ci = [1 + ci[0], 1 + ci[1]] if ci else None
    return {"factor": _r(factor), "ci": _ri(tuple(ci)) if ci else None, "from": line["metric"]}


def predictions(da: list[dict[str, Any]], figures: dict[str, dict[str, Any]],
                sides: dict[str, list[RunInput]]) -> list[dict[str, Any]]:
    """A's recommendations with a numeric gain, beside the gain B realised and whether it fell inside."""
    if not da:
        return []
    d = da[0]
    out, seen = [], set()
    for f in d.get("findings", []):
        if not f.get("label"):
            continue
        for rec in f.get("recommendations", []):
            bound, point, on = rec.get("gain_max"), rec.get("gain_point"), rec.get("gain_on") or "throughput"
            if bound is None and point is None:
                continue
            key = (f["rule"], bound, point, on)
            if key in seen:
                continue
            seen.add(key)
            real = realised_gain(on, figures, sides)
            factor = real["factor"]
            ci = real["ci"] or ([factor, factor] if factor is not None else None)
            inside = None if factor is None or bound is None else bool(ci[0] <= bound)
            near = None if factor is None or point is None else bool(abs(factor / point - 1) <= POINT_TOLERANCE)
            out.append({"rule": f["rule"], "label": f["label"], "primary": f["label"] == d.get("primary"),
                        "text": rec.get("text", ""), "expected_gain": rec.get("expected_gain", ""),
                        "gain_on": on, "gain_max": bound, "gain_point": point, "realised": factor,
                        "realised_ci": real["ci"], "realised_from": real["from"],
                        "within_bound": inside, "near_point": near})
    out.sort(key=lambda p: not p["primary"])
    return out


# -- environment -------------------------------------------------------------------------------------

def _env_of(r: RunInput) -> dict[str, Any]:
    m = r.run.manifest
    versions = m.get("versions") or {}
    target = versions.get("target") or {}
    devices = (m.get("gpu") or {}).get("devices") or []
    metrics = (r.diagnosis or {}).get("metrics") or {}
    batch = metrics.get("steady.batch_p50")
    return {
        "gpu": ", ".join(sorted({str(d.get("name")) for d in devices if isinstance(d, dict)})) or None,
        "driver": (m.get("gpu") or {}).get("driver"),
        "cpu": (m.get("host") or {}).get("cpu_model"),
        "python": target.get("python") or versions.get("python"),
        "torch": target.get("torch") or versions.get("torch"),
        "onnxruntime": target.get("onnxruntime") or versions.get("onnxruntime"),
        "batch size": None if batch is None else f"{batch:g}",
        "dtype": _dtype(r.run),
        "command": " ".join(str(c) for c in m.get("command") or []) or None,
    }


def _dtype(run: Run) -> str | None:
    if is_load_run(run):
        return None
    steps = run.table("steps")
    if steps.empty or "dtype" not in steps.columns:
        return None
    counts = steps["dtype"].dropna().astype(str).value_counts()
    return str(counts.index[0]).replace("torch.", "") if len(counts) else None


def environment(a: list[RunInput], b: list[RunInput]) -> list[dict[str, Any]]:
    """What each side ran on and with; `differs` marks the fields whose values differ between sides."""
    ea, eb = [_env_of(r) for r in a], [_env_of(r) for r in b]
    out = []
    for key in ea[0]:
        va = sorted({str(e[key]) for e in ea if e[key] is not None})
        vb = sorted({str(e[key]) for e in eb if e[key] is not None})
        out.append({"field": key, "a": " | ".join(va) or None, "b": " | ".join(vb) or None,
                    "differs": bool(va and vb and va != vb)})
    return out


def _program(r: RunInput) -> str:
    """The program a run ran: the script or module after the interpreter, else the command's first word."""
    cmd = [str(c) for c in r.run.manifest.get("command") or []]
    if is_load_run(r.run):
        return "diag load " + next((c for c in cmd if "://" in c), "")
    if cmd and os.path.basename(cmd[0]).startswith("python"):
        rest = [c for c in cmd[1:] if not c.startswith("-") or c == "-m"]
        if rest[:1] == ["-m"] and len(rest) > 1:
            return "-m " + rest[1]
        return os.path.basename(rest[0]) if rest else cmd[0]
    if r.run.manifest.get("imported_from"):
        return "trace"
    return os.path.basename(cmd[0]) if cmd else ""


def warnings(a: list[RunInput], b: list[RunInput]) -> list[str]:
    """Why this comparison may mislead: different programs, set-ups, kinds of run, verdicts within a side."""
    out = []
    pa, pb = sorted({_program(r) for r in a}), sorted({_program(r) for r in b})
    if pa != pb:
        out.append(f"different programs: A ran {', '.join(pa) or '?'}, B ran {', '.join(pb) or '?'} "
                   "(compared anyway)")
    for side, runs in (("A", a), ("B", b)):
        if len({_program(r) for r in runs}) > 1:
            out.append(f"side {side} mixes programs: its runs are not repeats of one set-up")
    ka = {_run_summary(r)["kind"] for r in a}
    kb = {_run_summary(r)["kind"] for r in b}
    if ka != kb:
        out.append(f"different kinds of run: A is {'/'.join(sorted(ka))}, B is {'/'.join(sorted(kb))}: "
                   "only the figures both have are compared")
    diff = [e["field"] for e in environment(a, b) if e["differs"] and e["field"] != "command"]
    if diff:
        out.append("the set-ups differ (" + ", ".join(diff) + "): a change may come from them, not from the fix")
    if any(r.run.partial for r in [*a, *b]):
        out.append("a run is partial (cut short or lost rows): its figures rest on what was recorded")
    return out
