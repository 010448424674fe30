"""The rate a server holds: which load level to try next, and the knee of the latency curve.

A sweep climbs geometrically (level x factor each step) until the SLOs break
twice or errors explode (more than half the requests fail, or the server stops
answering), then bisects between the highest level that held and the lowest
that broke for a few refining steps. Levels are requests/s (open loop) or
requests in flight (closed loop, whole numbers).
"""

from __future__ import annotations

import math
from typing import Any

EXPLODED_ERROR_RATE = 0.5


def exploded(stats: dict[str, Any], stopped: str) -> bool:
    """Errors so many that a higher level can teach nothing."""
    return bool(stopped) or (stats.get("error_rate") or 0.0) > EXPLODED_ERROR_RATE


def climb_levels(start: float, factor: float, steps: int, whole: bool) -> list[float]:
    """The climbing levels: start, start*factor, ... (whole numbers for concurrency, each larger than the last)."""
    out: list[float] = []
    level = start
    for _ in range(steps):
        v = float(max(math.ceil(level), (out[-1] + 1) if out else 1)) if whole else level
        out.append(v)
        level *= factor
    return out


def bisect_level(held: float, broke: float, whole: bool) -> float | None:
    """The next level between the highest that held and the lowest that broke (None: nothing left between)."""
    mid = math.sqrt(held * broke)  # geometric middle: levels are spaced by a factor
    if whole:
        mid = float(round(mid))
        return mid if held < mid < broke else None
    return mid if broke - held > 0.01 * held else None


def bounds(steps: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """(highest level that held below the lowest that broke, lowest level that broke)."""
    broke = min((s["level"] for s in steps if not s["held"]), default=None)
    held = max((s["level"] for s in steps if s["held"] and (broke is None or s["level"] < broke)), default=None)
    return held, broke


def knee(steps: list[dict[str, Any]], key: str = "p99_ms") -> float | None:
    """The level where latency turns up (Kneedle): the point of the normalised latency-vs-level
    curve furthest below the straight line from its first to its last point. None under 3 points."""
    pts = sorted((s["level"], s[key]) for s in steps if s.get(key) is not None)
    if len(pts) < 3:
        return None
    (x0, y0), (x1, y1) = pts[0], pts[-1]
    if x1 == x0 or y1 <= y0:
        return None  # latency never rose: no knee within the levels tried
    gaps = [((x - x0) / (x1 - x0)) - ((y - y0) / (y1 - y0)) for x, y in pts]
    best = max(range(len(pts)), key=gaps.__getitem__)
    return pts[best][0] if gaps[best] > 0 else None


def summary(steps: list[dict[str, Any]], unit: str) -> dict[str, Any]:
    """The sweep's answer: the highest level meeting the SLOs, its throughput, and the knee."""
    held, _ = bounds(steps)
    best = next((s for s in steps if s["level"] == held and s["held"]), None)
    return {"unit": unit, "steps": steps, "best_level": held,
            "best_throughput_per_s": best["throughput_per_s"] if best else None,
            "best_p99_ms": best["p99_ms"] if best else None, "knee_level": knee(steps)}
