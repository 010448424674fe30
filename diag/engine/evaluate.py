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
from typing import Any, NamedTuple

from simpleeval import DEFAULT_OPERATORS, InvalidExpression, SimpleEval

from diag.analysis.metrics import unit
from diag.analysis.units import format_value

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

# Caps that keep a hostile rule file from taking time or memory (issue 9): an expression
# is short and shallow, its numbers modest, and its arithmetic done in floats, so
# `9**3999999` overflows at once (no value) instead of building a 3.8-million-digit int.
MAX_EXPR_CHARS = 1000
MAX_EXPR_DEPTH = 32
MAX_EXPR_NODES = 400
MAX_CONSTANT = 1e18
MAX_FORMAT_WIDTH = 200
MAX_FORMAT_PRECISION = 50


def _float(x: Any) -> float:
    if isinstance(x, (int, float)):  # bool included: True + 1 stays 2
        return float(x)
    raise TypeError(f"not a number: {type(x).__name__}")


def _arith(fn: Any) -> Any:
    def apply(a: Any, b: Any) -> float:
        return fn(_float(a), _float(b))

    return apply


# Numbers only: no bit operations, no `in`/`is`, no repetition of strings.
OPERATORS: dict[type, Any] = {
    **{k: v for k, v in DEFAULT_OPERATORS.items()
       if k in (ast.Eq, ast.NotEq, ast.Gt, ast.Lt, ast.GtE, ast.LtE, ast.Not)},
    ast.Add: _arith(lambda a, b: a + b), ast.Sub: _arith(lambda a, b: a - b),
    ast.Mult: _arith(lambda a, b: a * b), ast.Div: _arith(lambda a, b: a / b),
    ast.FloorDiv: _arith(lambda a, b: a // b), ast.Mod: _arith(lambda a, b: a % b),
    ast.Pow: _arith(math.pow),  # OverflowError or ValueError, never a huge int or a complex
    ast.USub: lambda a: -_float(a), ast.UAdd: lambda a: _float(a),
}


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

        ev = SimpleEval(operators=OPERATORS, functions={**FUNCTIONS, "value": value, "has": has}, names=names)
        try:
            out = ev.eval(self.source, previously_parsed=self._tree)
        except (InvalidExpression, ZeroDivisionError, TypeError, ValueError, OverflowError, KeyError):
            return None
        if isinstance(out, float) and not math.isfinite(out):
            return None  # an overflow to inf says nothing a rule could use
        return out


def compile_expr(source: str, known: Iterable[str]) -> Expr:
    """Check and parse an expression; ValueError says what is wrong with it."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("empty expression")
    if len(source) > MAX_EXPR_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPR_CHARS} characters")
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
    except (RecursionError, MemoryError):
        raise ValueError(f"expression nested too deeply: {source[:60]!r}...") from None
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
    _check_size(tree, source)
    unknown = sorted(m for m in used | optional if m not in known)
    if unknown:
        raise ValueError(f"unknown metric {unknown[0]!r} in {source!r}")
    # the one parse serves the evaluator too (what SimpleEval.parse(text) would build: the statement
    # holding the expression), and bounds() reads it: rules load with one parse per expression
    return Expr(text, frozenset(used), frozenset(optional), ast.copy_location(ast.Expr(value=tree.body), tree.body))


def _check_size(tree: ast.AST, source: str) -> None:
    """ValueError if the tree is deeper or larger than the caps, or holds a huge number or a
    string that is not a metric name of value()/has()."""
    names_ok = {id(n.args[0]) for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                and isinstance(n.func, ast.Name) and n.func.id in _OPTIONAL}
    stack, count = [(tree, 1)], 0
    while stack:  # iterative: a deep tree must not exhaust Python's own stack here
        node, depth = stack.pop()
        count += 1
        if depth > MAX_EXPR_DEPTH or count > MAX_EXPR_NODES:
            raise ValueError(f"expression too complex (more than {MAX_EXPR_DEPTH} levels or "
                             f"{MAX_EXPR_NODES} parts): {source[:60]!r}")
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, (int, float, complex)) and not isinstance(v, bool) \
                    and not (isinstance(v, (int, float)) and abs(v) <= MAX_CONSTANT):
                raise ValueError(f"number out of range (at most {MAX_CONSTANT:g}) in {source[:60]!r}")
            if isinstance(v, (str, bytes)) and id(node) not in names_ok:
                raise ValueError(f"text is only allowed as the metric name of value()/has() in {source[:60]!r}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


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
    tree = expr._tree.value if isinstance(expr._tree, ast.Expr) else ast.parse(expr.source, mode="eval").body
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


UNIT_SPEC = "unit"  # `{metric:unit}`: the metric's value as every view prints its unit (4513 ms -> 4.51 s)


class _Field(NamedTuple):
    name: str
    value: Any


class _Template(string.Formatter):
    """str.format where a field is a whole metric name (dots included); missing values print n/a."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        return _Field(field_name, kwargs.get(field_name)), field_name

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if isinstance(value, _Field) and conversion is not None:
            value = value.value
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        name = ""
        if isinstance(value, _Field):
            name, value = value
        if value is None:
            return "n/a"
        if format_spec == UNIT_SPEC:
            return format_value(value, unit(name))
        if check_format_spec(format_spec) is not None:
            format_spec = ""  # never a 2 GB padding: the checked template cannot get here
        try:
            return format(value, format_spec)
        except (TypeError, ValueError, OverflowError):
            return str(value)


_FORMATTER = _Template()


def render(template: str, values: Mapping[str, Any]) -> str:
    """Fill `{metric:spec}` fields from values."""
    return _FORMATTER.vformat(template, (), dict(values))


# [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)[_,]?(?:\.(\d+))?[bcdeEfFgGnosxX%]?", re.S)


def check_format_spec(spec: str) -> str | None:
    """None if `spec` is a plain format spec within the caps (or `unit`), else what is wrong with it."""
    if spec == UNIT_SPEC:
        return None
    m = _SPEC.fullmatch(spec)
    if not m or "{" in spec:
        return f"format spec {spec[:40]!r} not understood"
    width, precision = m.group(1), m.group(2)
    if width and (len(width) > 4 or int(width) > MAX_FORMAT_WIDTH):
        return f"format width {width[:12]} over {MAX_FORMAT_WIDTH}"
    if precision and (len(precision) > 4 or int(precision) > MAX_FORMAT_PRECISION):
        return f"format precision {precision[:12]} over {MAX_FORMAT_PRECISION}"
    return None


def template_fields(template: str) -> list[str]:
    """The field names a template uses; ValueError if it does not parse or a format spec is
    nested or beyond the caps (MAX_FORMAT_WIDTH, MAX_FORMAT_PRECISION)."""
    fields = []
    for _, f, spec, _ in string.Formatter().parse(template):
        if f is None:
            continue
        problem = check_format_spec(spec or "")
        if problem:
            raise ValueError(problem)
        if f:
            fields.append(f)
    return fields
