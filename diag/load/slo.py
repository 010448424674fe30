"""Service-level objectives: `p99<200ms`, `errors<1%`, parsed and checked against a result."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from diag.analysis.catalog import PERCENTILES
from diag.errors import DiagError

_UNITS_MS = {"ms": 1.0, "s": 1000.0, "us": 1e-3, "µs": 1e-3}
_LATENCY = {f"p{q}": f"p{q}_ms" for q in PERCENTILES} | {"max": "max_ms", "mean": "mean_ms"}
_SLO = re.compile(r"^\s*(?P<metric>[a-z0-9]+)\s*(?P<op><=|<)\s*(?P<num>[0-9]*\.?[0-9]+)\s*(?P<unit>ms|s|us|µs|%)?\s*$")
SYNTAX = f"METRIC<LIMIT with METRIC one of {', '.join(_LATENCY)} (ms, s or us) or errors (% or a fraction)"


@dataclass(frozen=True)
class Slo:
    """One objective: `key` (a field of the load statistics) must stay `op` `limit`."""

    text: str
    key: str  # "p99_ms", "error_rate", ...
    op: str  # "<" or "<="
    limit: float  # ms for latency, a fraction for errors

    def check(self, stats: dict[str, Any]) -> dict[str, Any]:
        """{slo, key, limit, value, held}: held is False when the value is missing (no request answered)."""
        value = stats.get(self.key)
        held = value is not None and (value < self.limit if self.op == "<" else value <= self.limit)
        return {"slo": self.text, "key": self.key, "limit": self.limit, "value": value, "held": bool(held)}


def parse_slo(text: str) -> Slo:
    """`p99<200ms`, `p50<=0.1s`, `errors<1%`, `errors<0.01`; DiagError (one line) otherwise."""
    m = _SLO.match(text.lower())
    if not m:
        raise DiagError(f"--slo {text!r}: expected {SYNTAX}")
    metric, op, num, unit = m["metric"], m["op"], float(m["num"]), m["unit"]
    if metric == "errors":
        if unit not in (None, "%"):
            raise DiagError(f"--slo {text!r}: an error rate is a percentage (errors<1%) or a fraction")
        limit = num / 100 if unit == "%" else num
        if limit > 1:
            raise DiagError(f"--slo {text!r}: an error rate above 100% holds always")
        return Slo(text, "error_rate", op, limit)
    if metric not in _LATENCY:
        raise DiagError(f"--slo {text!r}: unknown metric {metric!r}; expected {SYNTAX}")
    if unit is None or unit == "%":
        raise DiagError(f"--slo {text!r}: a latency needs a unit (ms, s or us), e.g. {metric}<200ms")
    return Slo(text, _LATENCY[metric], op, num * _UNITS_MS[unit])


def check_all(slos: list[Slo], stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Each SLO checked against `stats` (diag.load.stats.summarise)."""
    return [s.check(stats) for s in slos]
