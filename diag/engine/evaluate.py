"""Safe expressions over metrics (simpleeval, never eval) and message templates.

Rule conditions and scores are Python-like expressions whose names are metric
names, dots included: `steady.copy_share >= 0.3 and steady.gpu_busy < 0.6`.
A condition that names a metric the run has no value for is false, and a
score or gain that needs one is None: missing data never fires a rule.
`value("steady.x", default)` and `has("steady.x")` read optional metrics.
"""

from __future__ import annotations

import ast
import math
import re
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from simpleeval import InvalidExpression, SimpleEval

# a quoted string (left alone) or a dotted name (a metric)
_TOKEN = re.compile(r"""("[^"\\]*"|'[^'\\]*')|(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)""")
_PREFIX = "m__"


def _ident(metric: str) -> str:
    return _PREFIX + metric.replace(".", "__")


def ramp(x: float, lo: float, hi: float) -> float:
    """0 at or below lo, 1 at or above hi, linear between (hi < lo ramps downwards)."""
    if hi == lo:
        return 1.0 if x >= hi else 0.0
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


def clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return min(hi, max(lo, x))


def amdahl(share: float, factor: float) -> float:
    """Overall speed-up when a `share` of the time gets `factor` times faster."""
    share = clamp(share)
    return 1.0 / (1.0 - share + share / factor) if factor > 0 else 1.0


def limit(share: float) -> float:
    """Overall speed-up when a `share` of the time disappears entirely (Amdahl's bound)."""
    share = clamp(share, 0.0, 0.99)
    return 1.0 / (1.0 - share)


FUNCTIONS: dict[str, Any] = {"min": min, "max": max, "abs": abs, "ramp": ramp, "clamp": clamp,
                             "amdahl": amdahl, "limit": limit}
_OPTIONAL = ("value", "has")  # functions that read a metric by its quoted name


class _Missing(Exception):
    """A metric the expression needs has no value in this run."""


@dataclass
class Expr:
    """A checked expression, parsed once."""

    source: str
    metrics: frozenset[str]  # metrics it needs (missing -> no value)
    optional: frozenset[str]  # metrics it reads through value()/has()
    _tree: ast.AST

    def __call__(self, metrics: Mapping[str, float | None]) -> Any:
        """The expression's value, or None when a metric it needs is missing or it fails."""
        names: dict[str, Any] = {"True": True, "False": False, "None": None}
        for m in self.metrics:
            v = metrics.get(m)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return None
            names[_ident(m)] = v

        def value(name: str, default: Any = None) -> Any:
            v = metrics.get(name)
            return default if v is None else v

        def has(name: str) -> bool:
            return metrics.get(name) is not None

        ev = SimpleEval(functions={**FUNCTIONS, "value": value, "has": has}, names=names)
        try:
            return ev.eval(self.source, previously_parsed=self._tree)
        except (InvalidExpression, ZeroDivisionError, TypeError, ValueError, OverflowError):
            return None


def compile_expr(source: str, known: Iterable[str]) -> Expr:
    """Check and parse an expression; ValueError says what is wrong with it."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("empty expression")
    known = set(known)
    used: set[str] = set()

    def swap(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1)
        used.add(m.group(2))
        return _ident(m.group(2))

    text = _TOKEN.sub(swap, source.strip())
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {source!r}: {exc.msg}") from None
    optional: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id.startswith(_PREFIX) or node.id in FUNCTIONS or node.id in _OPTIONAL \
                    or node.id in ("True", "False", "None"):
                continue
            raise ValueError(f"unknown name {node.id!r} in {source!r} (metrics look like steady.gpu_busy)")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in set(FUNCTIONS) | set(_OPTIONAL):
                raise ValueError(f"unknown function in {source!r}; allowed: "
                                 f"{', '.join(sorted(set(FUNCTIONS) | set(_OPTIONAL)))}")
            if node.func.id in _OPTIONAL:
                arg = node.args[0] if node.args else None
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    raise ValueError(f"{node.func.id}() takes a quoted metric name in {source!r}")
                optional.add(arg.value)
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.ListComp, ast.DictComp,
                             ast.SetComp, ast.GeneratorExp, ast.NamedExpr)):
            raise ValueError(f"unsupported syntax in {source!r}")
    unknown = sorted(m for m in used | optional if m not in known)
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r} in {source!r}")
    return Expr(text, frozenset(used), frozenset(optional), SimpleEval.parse(text))


class _Template(string.Formatter):
    """str.format where a field is a whole metric name (dots included); missing values print n/a."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        return kwargs.get(field_name), field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            return "n/a"
        try:
            return format(value, format_spec)
        except (TypeError, ValueError):
            return str(value)


_FORMATTER = _Template()


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill `{metric:spec}` fields from values."""
    return _FORMATTER.vformat(template, (), dict(values))


def template_fields(template: str) -> list[str]:
    """The field names a template uses; ValueError if it does not parse."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]
