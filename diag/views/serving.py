"""The serving part of a Diagnosis as short lines (console, TUI and report share them): request time
by measured part and by stage, threads by role, workers judged on their own, labels not judged.

Formatting only: every number comes computed from analysis (Diagnosis.serving, not_judged).
"""

from __future__ import annotations

from typing import Any

from diag.analysis.units import format_value
from diag.engine.diagnosis import Diagnosis

MAX_STAGES = 5
MAX_THREADS = 4


def not_judged_text(d: Diagnosis, label: str) -> str:
    """'n/a (reason)' for a label the run gave no evidence to judge, '' otherwise."""
    reason = d.not_judged.get(label)
    return f"n/a ({reason})" if reason else ""


def parts_line(d: Diagnosis) -> str:
    parts = d.serving.get("parts") or []
    if not parts:
        return ""
    return "request time: " + " · ".join(
        f"{p['words']} {format_value(p['share'], 'ratio')} ({format_value(p['mean_ms'], 'ms')})" for p in parts)


def stages_line(d: Diagnosis) -> str:
    stages = (d.serving.get("stages") or [])[:MAX_STAGES]
    if not stages:
        return ""
    return "stages: " + " · ".join(
        f"{s['stage']} {format_value(s['share'], 'ratio')} ({format_value(s['mean_ms'], 'ms')})" for s in stages)


def thread_text(t: dict[str, Any]) -> str:
    cpu = format_value(t.get("cpu_cores"), "cores") if t.get("cpu_cores") is not None else "CPU n/a"
    hot = f", most in {t['hot_frame']} ({format_value(t.get('hot_share'), 'ratio')} of samples)" \
        if t.get("hot_frame") else ""
    return f"{t['role']} {t.get('thread') or t['tid']} (pid {t['pid']}): {cpu}{hot}"


def thread_lines(d: Diagnosis, limit: int = MAX_THREADS) -> list[str]:
    return [thread_text(t) for t in (d.serving.get("threads") or [])[:limit]]


def member_text(m: dict[str, Any]) -> str:
    idx = f"#{m['index']}" if m.get("index", -1) >= 0 else "#?"
    share = f" ({format_value(m['request_share'], 'ratio')})" if m.get("request_share") is not None else ""
    p99 = (m.get("metrics") or {}).get("steady.request_p99_ms")
    lat = f", p99 {format_value(p99, 'ms')}" if p99 is not None else ""
    verdict = f"{m['primary']} {m['score']:.2f}" if m.get("primary") else "no bottleneck"
    return f"{m['role']} {idx} pid {m['pid']}: {m['requests']:.0f} requests{share}{lat}, verdict {verdict}"


def member_lines(d: Diagnosis) -> list[str]:
    return [member_text(m) for m in d.serving.get("members") or []]


def lines(d: Diagnosis) -> list[str]:
    """Every serving line, in the order the console shows them."""
    out = [parts_line(d), stages_line(d)]
    members = member_lines(d)
    if members:
        out += ["workers, each judged on its own:"] + ["  " + m for m in members]
    return [line for line in out if line]
