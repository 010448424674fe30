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


_OPS: dict[type, str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def bounds(expr: Expr) -> dict[str, list[tuple[str, float]]]:
    """Per metric, the (operator, number) comparisons `expr` must pass to be true.

    Only a top-level `and` term that compares one metric (by name or through
    value()) with a number counts: `a >= 0.2 and value('b', 0) < 1` gives
    {a: [(">=", 0.2)], b: [("<", 1.0)]}; terms under `or`/`not` or against
    other metrics say nothing alone.
    """
    names = {_ident(m): m for m in expr.metrics}
    tree = ast.parse(expr.source, mode="eval").body
    terms = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    out: dict[str, list[tuple[str, float]]] = {}
    for term in terms:
        if not (isinstance(term, ast.Compare) and len(term.ops) == 1 and type(term.ops[0]) in _OPS):
            continue
        op, left, right = _OPS[type(term.ops[0])], term.left, term.comparators[0]
        metric, number = _metric_of(left, names), _number(right)
        if metric is None or number is None:
            metric, number, op = _metric_of(right, names), _number(left), _FLIP[op]
        if metric is not None and number is not None:
            out.setdefault(metric, []).append((op, number))
    return out


def bound_text(comparisons: list[tuple[str, float]]) -> str:
    """'>= 0.2', or '>= 0.05 and < 0.2' for several."""
    return " and ".join(f"{op} {int(n) if n.is_integer() and abs(n) < 1e15 else n!r}" for op, n in comparisons)


def parse_bound(text: str) -> list[tuple[str, float]] | None:
    """The comparisons of a threshold written like bound_text's output; None if it is free text."""
    out = []
    for part in text.split(" and "):
        m = re.fullmatch(r"\s*(<=|>=|<|>|==|!=)\s*([-+0-9.eE]+)\s*", part)
        try:
            out.append((m.group(1), float(m.group(2))))
        except (AttributeError, ValueError):  # no match, or not a number
            return None
    return out


def _metric_of(node: ast.AST, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "value" and node.args \
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def _number(node: ast.AST) -> float | None:
    sign = 1.0
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1.0, node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return sign * float(node.value)
    return None


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
