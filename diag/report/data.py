"""The report as plain data: dicts, lists, strings and numbers, no HTML.

`build_report_data(run, diagnosis)` gathers what the report shows from the
Diagnosis and from diag.analysis (series, tables); it aggregates nothing from
raw tables itself. Strings stay raw here (the target's own names, unescaped):
escaping is the renderer's job, so tests on this data read like the run.
"""

from __future__ import annotations

import datetime as _dt
import math
import shlex
from typing import Any

import numpy as np
import pandas as pd

from diag.analysis import latency as latency_mod
from diag.analysis import series as series_mod
from diag.analysis import tables
from diag.analysis.collectors import missing_data_note
from diag.analysis.units import format_value
from diag.engine.diagnosis import LABEL_MEANING, LABELS, Diagnosis, Phase, severity_rank
from diag.report.load_section import load_data
from diag.store.run import Run
from diag.views import ranks as ranks_view
from diag.views import serving as serving_view
from diag.views.margin import margin_text

TIMELINE_POINTS = 2000
HIST_BINS = 60
STACK_NODES = 1500
TOP_KERNELS = 15
TOP_FRAMES = 15
SLOWEST = 10


def build_report_data(run: Run, diagnosis: Diagnosis) -> dict[str, Any]:
    """Everything the report shows, as plain JSON-able data (no HTML)."""
    manifest = run.manifest
    steady = _steady_phase(diagnosis.phases)
    return {
        "title": f"diag report: {_command(manifest)}",
        "run": _run_summary(run, diagnosis),
        "verdict": _verdict(diagnosis),
        "scores": _scores(diagnosis),
        "findings": [_finding(f) for f in diagnosis.findings],
        "phases": [{"name": p.name, "start_s": float(p.start_s), "end_s": float(p.end_s)} for p in diagnosis.phases],
        "timeline": _timeline(run),
        "latency": _latency(run),
        "breakdown": _breakdown(diagnosis),
        "serving": _serving(diagnosis),
        "ranks": {"columns": list(ranks_view.COLUMNS), "rows": ranks_view.rank_rows(diagnosis),
                  "job": ranks_view.job_line(diagnosis)},
        "load": load_data(diagnosis),
        "stacks": _stacks(run, diagnosis.phases, steady),
        "gpu_work": _gpu_work(run),
        "environment": _environment(manifest),
    }


# --- header, verdict, findings ----------------------------------------------

def _command(manifest: dict[str, Any]) -> str:
    cmd = manifest.get("command") or []
    if isinstance(cmd, str):
        return cmd
    return shlex.join(str(c) for c in cmd) if cmd else "(unknown command)"


def _gpu_name(manifest: dict[str, Any]) -> str:
    devices = (manifest.get("gpu") or {}).get("devices") or []
    names = sorted({str(d.get("name", "?")) for d in devices if isinstance(d, dict)})
    return ", ".join(names)


def _run_summary(run: Run, diagnosis: Diagnosis) -> dict[str, Any]:
    m = run.manifest
    start_ns = m.get("start_ns")
    started = ""
    if start_ns:
        started = _dt.datetime.fromtimestamp(int(start_ns) / 1e9, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return {
        "command": _command(m),
        "run_id": str(m.get("run_id", "")),
        "path": run.path,
        "started": started,
        "duration_s": round(run.duration_s, 3),
        "exit_code": m.get("exit_code"),
        "signal": m.get("signal"),
        "partial": run.partial,
        "synthetic": bool(m.get("synthetic", False)),
        "gpu": _gpu_name(m) or "none",
        "device": str(diagnosis.run.get("device", "")) if isinstance(diagnosis.run, dict) else "",
    }


def _verdict(diagnosis: Diagnosis) -> dict[str, Any]:
    primary = diagnosis.primary
    top = sorted(diagnosis.findings, key=lambda f: severity_rank(f.severity), reverse=True)
    lead = next((f.title for f in top if f.label == primary), top[0].title if top else "")
    if primary is None:  # the engine's own finding says why (too little evidence, or an idle program)
        return {"label": None, "text": f"No verdict: {diagnosis.no_verdict_reason()}", "lead": lead, "margin": ""}
    meaning = LABEL_MEANING.get(primary, "")
    return {"label": primary, "text": meaning[:1].upper() + meaning[1:] + ".", "lead": lead,
            "score": round(float(diagnosis.scores.get(primary, 0.0)), 3), "margin": margin_text(diagnosis)}


def _scores(diagnosis: Diagnosis) -> list[dict[str, Any]]:
    rows = [{"label": label, "score": round(_clip01(diagnosis.scores.get(label, 0.0)), 3),
             "primary": label == diagnosis.primary,
             "not_judged": serving_view.not_judged_text(diagnosis, label)} for label in LABELS]
    return sorted(rows, key=lambda r: r["score"], reverse=True)


def _serving(diagnosis: Diagnosis) -> dict[str, Any]:
    """A server's request time by part and stage, threads by role, workers (diag.views.serving's lines)."""
    if not diagnosis.serving:
        return {}
    return {"parts": serving_view.parts_line(diagnosis), "stages": serving_view.stages_line(diagnosis),
            "threads": serving_view.thread_lines(diagnosis, limit=20), "members": serving_view.member_lines(diagnosis)}


def _finding(f: Any) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "label": f.label,
        "severity": f.severity,
        "title": f.title,
        "score": round(float(f.score or 0.0), 3),
        "evidence": [{"metric": e.metric, "value": _num(e.value), "unit": e.unit,
                      "text": format_value(e.value, e.unit), "threshold": e.threshold} for e in f.evidence],
        "recommendations": [{"text": r.text, "code": r.code, "expected_gain": r.expected_gain, "link": r.link}
                            for r in f.recommendations],
    }


# --- charts' data -----------------------------------------------------------

def _timeline(run: Run) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {}
    for s in series_mod.timeline(run, max_points=TIMELINE_POINTS):
        g = groups.setdefault(s.group, {"group": s.group, "title": series_mod.GROUP_TITLES.get(s.group, s.group),
                                        "units": [], "series": []})
        if s.unit not in g["units"]:
            g["units"].append(s.unit)
        g["series"].append({"name": s.name, "unit": s.unit, "t_s": _floats(s.t_s, 3),
                            "values": _floats(s.values, 4)})
    notes = []
    if "gpu" not in groups and "gpm" not in groups:
        notes.append(missing_data_note(run.manifest.get("collectors") or {}, "gpu"))
    elif "gpm" not in groups:
        notes.append("No SM / tensor / DRAM activity: this GPU or driver gives no GPM metrics (Hopper and newer).")
    return {"groups": list(groups.values()), "notes": notes}


def _latency(run: Run) -> dict[str, Any]:
    # The summary, percentiles and histograms are the steady state's (the metrics' numbers, latency.SCOPE);
    # the slowest calls and the queue vs service split are the whole run's.
    summary = tables.latency_summary(run)
    samples = latency_mod.run_latencies(run)
    kinds = []
    qvs = tables.queue_vs_service(run)
    for row in _records(summary):
        kind = row["kind"]
        entry = {"kind": kind, "scope": latency_mod.SCOPE, "summary": row,
                 "histogram": _histogram(samples[kind].ms, samples[kind].weight),
                 "percentiles": {f"p{p}": row.get(f"p{p}_ms") for p in latency_mod.PERCENTILES},
                 "slowest": _records(tables.slowest(run, kind, SLOWEST)), "queue": None}
        if kind == "request" and not qvs.empty:
            q = pd.to_numeric(qvs["queue_ms"], errors="coerce").dropna()
            s = pd.to_numeric(qvs["service_ms"], errors="coerce").dropna()
            entry["queue"] = {"queue_p50_ms": _num(q.median()) if len(q) else None,
                              "service_p50_ms": _num(s.median()) if len(s) else None,
                              "matched": int(len(q)), "requests": int(len(qvs))}
        kinds.append(entry)
    # Requests first: they are what users wait on.
    kinds.sort(key=lambda k: 0 if k["kind"] == "request" else 1)
    note = "" if kinds else "No steps or requests were recorded (no model call or request range seen)."
    return {"kinds": kinds, "note": note, "scope": latency_mod.SCOPE, "whole_run": "queue and service p50, slowest calls"}


def _histogram(values: np.ndarray, weight: np.ndarray) -> dict[str, Any]:
    """Calls per bin (each value counts `weight` calls), bins up to the 99.5th percentile (so one slow
    call does not squash the rest)."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    v, w = v[ok], np.asarray(weight, dtype=float)[ok]
    if len(v) == 0:
        return {"edges": [], "counts": [], "above": 0, "above_ms": None}
    hi = float(np.percentile(v, 99.5)) * 1.15
    lo = float(v.min())
    if hi <= lo:
        hi = lo + max(abs(lo) * 0.1, 1e-3)
    counts, edges = np.histogram(v, bins=HIST_BINS, range=(lo, hi), weights=w)
    return {"edges": _floats(edges, 4), "counts": [int(round(c)) for c in counts],
            "above": int(round(w[v > hi].sum())), "above_ms": round(hi, 4)}


def _breakdown(diagnosis: Diagnosis) -> dict[str, Any]:
    df = tables.time_breakdown(diagnosis.metrics)
    parts = [{"part": r["part"], "share": round(float(r["share"]), 4)} for r in _records(df)]
    return {"parts": parts,
            "note": "" if parts else "The diagnosis holds no steady-state time shares (no steady state found)."}


def _steady_phase(phases: list[Phase]) -> Phase | None:
    return next((p for p in phases if p.name == "steady"), None)


def _stacks(run: Run, phases: list[Phase], steady: Phase | None) -> dict[str, Any]:
    tree = tables.stack_tree(run, phase=steady, max_nodes=STACK_NODES)
    scope = "steady state" if steady is not None else "whole run"
    if tree.empty and steady is not None:
        tree = tables.stack_tree(run, phase=None, max_nodes=STACK_NODES)
        scope = "whole run"
    frames = tables.hot_frames(run, phases, TOP_FRAMES)
    if steady is not None and not frames.empty and (frames["phase"] == "steady").any():
        frames = frames[frames["phase"] == "steady"]
    note = "" if not tree.empty else missing_data_note(run.manifest.get("collectors") or {}, "stacks")
    return {"scope": scope, "tree": _icicle_nodes(tree), "hot_frames": _records(frames), "note": note}


def _icicle_nodes(tree: pd.DataFrame) -> list[dict[str, Any]]:
    """Nodes with their own (self) time, so the chart adds children up itself.

    Handing plotly totals ("branchvalues=total") fails to draw a node whose
    children sum to a hair more than it in floating point; self times cannot.
    """
    if tree.empty:
        return []
    child_sum = tree.groupby("parent")["value_s"].sum()
    nodes = []
    for r in tree.itertuples(index=False):
        own = max(0.0, float(r.value_s) - float(child_sum.get(r.id, 0.0)))
        nodes.append({"id": str(r.id), "parent": str(r.parent), "label": str(r.label),
                      "total_s": round(float(r.value_s), 4), "self_s": round(own, 6)})
    return nodes


def _gpu_work(run: Run) -> dict[str, Any]:
    kernels = tables.kernel_summary(run, TOP_KERNELS)
    note = "" if not kernels.empty else missing_data_note(run.manifest.get("collectors") or {}, "kernels")
    return {"kernels": _records(kernels), "categories": _records(tables.kernel_categories(run)),
            "memcpy": _records(tables.memcpy_kinds(run)), "note": note}


# --- environment --------------------------------------------------------------

def _environment(m: dict[str, Any]) -> dict[str, Any]:
    host = m.get("host") or {}
    gpu = m.get("gpu") or {}
    gpu_rows = [(k, gpu[k]) for k in ("count", "driver", "cuda_driver", "reason") if k in gpu]
    for d in gpu.get("devices") or []:
        if isinstance(d, dict):
            mem = d.get("memory_bytes")
            desc = f"{d.get('name', '?')}" + (f", {format_value(mem, 'bytes')}" if mem else "")
            desc += ", GPM metrics" if d.get("gpm") else ""
            gpu_rows.append((f"device {d.get('index', '?')}", desc))
    host_rows = [(k, format_value(v, "bytes") if k == "ram_bytes" else v) for k, v in host.items()]
    collectors = [{"name": str(name), "status": str(c.get("status", "?")), "reason": str(c.get("reason", "") or ""),
                   "detail": _detail(c)}
                  for name, c in (m.get("collectors") or {}).items() if isinstance(c, dict)]
    return {
        "run": _pairs([("command", _command(m)), ("cwd", m.get("cwd")), ("run id", m.get("run_id")),
                       ("exit code", m.get("exit_code")), ("signal", m.get("signal")),
                       ("partial", m.get("partial")), ("schema", m.get("schema"))]),
        "host": _pairs(host_rows),
        "gpu": _pairs(gpu_rows),
        "versions": _pairs(sorted((m.get("versions") or {}).items())),
        # The recorder keeps only allowlisted names; the report shows exactly those.
        "env": _pairs(sorted((m.get("env") or {}).items())),
        "collectors": collectors,
        "options": _pairs(sorted((m.get("options") or {}).items())),
    }


def _detail(c: dict[str, Any]) -> str:
    extra = {k: v for k, v in c.items() if k not in ("status", "reason")}
    return ", ".join(f"{k}={v}" for k, v in extra.items())


def _pairs(items: Any) -> list[list[str]]:
    return [[str(k), "" if v is None else str(v)] for k, v in items if v is not None and v != ""]


# --- small conversions ----------------------------------------------------------

def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def _clip01(v: Any) -> float:
    f = _num(v)
    return 0.0 if f is None else min(1.0, max(0.0, f))


def _floats(a: Any, digits: int) -> list[float | None]:
    arr = np.asarray(a, dtype=float)
    return [None if not math.isfinite(x) else round(float(x), digits) for x in arr]


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of plain Python values (NaN becomes None)."""
    out = []
    for row in df.to_dict(orient="records"):
        clean = {}
        for k, v in row.items():
            if isinstance(v, (np.bool_, bool)):
                clean[str(k)] = bool(v)
            elif isinstance(v, (np.integer,)):
                clean[str(k)] = int(v)
            elif isinstance(v, (float, np.floating)):
                clean[str(k)] = _num(v)
            else:
                clean[str(k)] = v
        out.append(clean)
    return out
