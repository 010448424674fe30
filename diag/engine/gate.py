"""The CI gate of `diag compare`: budgets such as `request_p99_ms > +10%` over a comparison.

A budget is one comparison of one metric with a number, checked by the same
hardened evaluator as the rules (diag.engine.evaluate: size, depth and number
caps, no eval). A number with `%` is a relative change from A to B
(`steps_per_s < -5%`); a plain number is B's own value (`request_p99_ms > 250`).
A budget is broken only when the whole confidence interval lies past it, so
noise never fails a build; a metric neither side has data for is bad input.

Names are metric catalog names (`steady.request_p99_ms`), the comparison's own
(`client.p99_ms`, `client.requests_per_s`), or short aliases: a steady metric
without its `steady.` prefix (`steps_per_s`, `gpu_busy`), `client_p99_ms`,
`client_per_s`, `cold_start_s`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any

from diag.analysis.compare import FIGURE_NAMES
from diag.analysis.metrics import BY_NAME
from diag.engine.evaluate import Expr, bounds, compile_expr
from diag.errors import DiagError
from diag.store.safe import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

KNOWN = frozenset(BY_NAME) | frozenset(FIGURE_NAMES)
ALIASES: dict[str, str] = {
    **{n.split(".", 1)[1]: n for n in KNOWN if n.startswith("steady.")},
    **{"client_" + n.split(".", 1)[1]: n for n in FIGURE_NAMES if n.startswith("client.")},
    "client_per_s": "client.requests_per_s",
    "cold_start_s": "coldstart.excess_s",
}
_WORD = re.compile(r"(?<![\w.'\"])([A-Za-z_]\w*)(?![\w.])")
_PERCENT = re.compile(r"([+-]?)\s*(\d+(?:\.\d*)?|\.\d+)\s*%")
MAX_BUDGETS = 100


@dataclass
class Budget:
    """One checked budget: the text the user wrote, its metric, and whether it is relative (%)."""

    text: str
    metric: str
    relative: bool
    expr: Expr
    op: str
    limit: float


def parse_budget(text: str) -> Budget:
    """A budget from its text; DiagError (exit 2) says what is wrong with it."""
    if not isinstance(text, str) or not text.strip():
        raise DiagError("--fail-if: empty budget")
    relative = "%" in text

    def alias(m: re.Match[str]) -> str:
        return ALIASES.get(m.group(1), m.group(1))

    def percent(m: re.Match[str]) -> str:
        v = float(m.group(2)) / 100.0
        return repr(-v if m.group(1) == "-" else v)

    source = _PERCENT.sub(percent, _WORD.sub(alias, text.strip()))
    if "%" in source:
        raise DiagError(f"--fail-if {text!r}: a percentage is a number then %, like +10%")
    try:
        expr = compile_expr(source, KNOWN)
    except ValueError as exc:
        raise DiagError(f"--fail-if {text!r}: {exc}") from None
    found = bounds(expr)
    if len(expr.metrics | expr.optional) != 1 or len(found) != 1 or len(next(iter(found.values()))) != 1:
        raise DiagError(f"--fail-if {text!r}: write one comparison of one metric with a number, "
                        "like 'request_p99_ms > +10%' or 'steps_per_s < -5%'")
    metric, [(op, limit)] = next(iter(found.items()))
    if op in ("==", "!="):
        raise DiagError(f"--fail-if {text!r}: use <, <=, > or >=")
    return Budget(text.strip(), metric, relative, expr, op, limit)


def load_budgets(path: str) -> list[str]:
    """The budget texts of a TOML file: `fail_if = ["request_p99_ms > +10%", ...]`."""
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise DiagError(f"--budgets {path}: not valid TOML ({exc})") from None
    items = data.get("fail_if")
    extra = set(data) - {"fail_if"}
    if extra or not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise DiagError(f"--budgets {path}: expected one key, fail_if = [\"METRIC > +10%\", ...]")
    if len(items) > MAX_BUDGETS:
        raise DiagError(f"--budgets {path}: more than {MAX_BUDGETS} budgets")
    return items


def check(budgets: list[Budget], comparison: dict[str, Any]) -> list[dict[str, Any]]:
    """Each budget against the comparison: `broken` when its whole interval lies past the limit."""
    lines = {line["metric"]: line for line in comparison["figures"] + comparison["metrics"]}
    out = []
    for b in budgets:
        line = lines.get(b.metric)
        if line is None or line["a" if b.relative else "b"] is None or line["b"] is None:
            raise DiagError(f"--fail-if {b.text!r}: no data for {b.metric} in these runs")
        if b.relative:
            point, ci = line["change"], line["change_ci"]
            if point is None:
                raise DiagError(f"--fail-if {b.text!r}: {b.metric} is 0 in A, so it has no relative change; "
                                "give a plain limit instead")
        else:
            point, ci = line["b"], line["b_ci"]
        lo, hi = ci if ci else (point, point)
        broken = bool(b.expr({b.metric: lo}) and b.expr({b.metric: hi}))
        out.append({"budget": b.text, "metric": b.metric, "relative": b.relative, "op": b.op, "limit": b.limit,
                    "value": point, "ci": [lo, hi], "broken": broken})
    return out
