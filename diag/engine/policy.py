"""The verdict policy (rules/policy.toml): thresholds and label priority as data.

The built-in file ships beside the rules (diag._rules/policy.toml) and is read
and checked once. A `--rules DIR` may hold its own policy.toml: each key it
sets replaces the built-in one, and the merged policy is checked the same way.
The rule loader skips files named POLICY_FILE (rules.py), so a policy is never
taken for a rule file.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass
from typing import Any

from diag.analysis.metrics import BY_NAME
from diag.engine.diagnosis import LABELS
from diag.engine.evaluate import Expr, compile_expr
from diag.engine.rules import POLICY_FILE, rules_root
from diag.errors import DiagError
from diag.store.safe import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# section -> key -> kind of value
_SCHEMA: dict[str, dict[str, str]] = {
    "verdict": {"primary_min": "share", "strong_score": "share", "weak_score": "share"},
    "steady": {"min_seconds": "number", "min_calls": "count", "min_trace_calls": "count"},
    "idle": {"busy_max": "share"},
    "labels": {"priority": "labels", "no_steady_needed": "labels"},
    "ties": {"close_margin": "share", "breaker": "breakers"},
}


@dataclass(frozen=True)
class TieBreaker:
    """Between two close labels, `prefer` wins when `when` holds on the run's metrics (evidence that separates them).

    The second label may be "*": the first against any other label.
    """

    labels: tuple[str, str]
    prefer: str
    when: Expr
    why: str


@dataclass(frozen=True)
class Policy:
    """How scores become a verdict (see rules/policy.toml for what each value means)."""

    primary_min: float
    strong_score: float
    weak_score: float
    min_steady_s: float
    min_steady_calls: int
    min_trace_calls: int
    idle_busy_max: float
    priority: tuple[str, ...]
    no_steady_needed: tuple[str, ...]
    close_margin: float = 0.0
    breakers: tuple[TieBreaker, ...] = ()

    def breaker_for(self, a: str, b: str, metrics: dict[str, float | None]) -> TieBreaker | None:
        """The first tie-breaker for the pair (a, b) whose evidence holds on these metrics."""
        for t in self.breakers:
            x, y = t.labels
            if ({x, y} == {a, b} or (y == "*" and x in (a, b))) and t.when(metrics) is True:
                return t
        return None

    def rank(self, label: str) -> int:
        """A label's place in the priority order (0 = wins every tie)."""
        return self.priority.index(label)


@functools.lru_cache(maxsize=1)
def builtin_policy_text() -> tuple[str, str]:
    """(name, text) of the built-in policy file."""
    return f"rules/{POLICY_FILE}", (rules_root() / POLICY_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def builtin_policy() -> Policy:
    """The built-in policy, read and checked once."""
    name, text = builtin_policy_text()
    return _policy(name, _merge({}, name, _parse(name, text)))


def load_policy(rule_dirs: tuple[str, ...] | list[str] = ()) -> Policy:
    """The built-in policy with the keys of each `DIR/policy.toml` of `rule_dirs` laid over it."""
    user = [os.path.join(d, POLICY_FILE) for d in rule_dirs if os.path.isfile(os.path.join(d, POLICY_FILE))]
    if not user:
        return builtin_policy()
    name, text = builtin_policy_text()
    merged = _merge({}, name, _parse(name, text))
    for path in user:
        merged = _merge(merged, path, _parse(path, read_text(path)))  # regular UTF-8 file, size-capped
    return _policy(" + ".join(user), merged)


def _parse(name: str, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DiagError(f"{name}: not valid TOML ({exc})") from None


def _merge(base: dict[str, Any], name: str, data: dict[str, Any]) -> dict[str, Any]:
    """`base` with each key of `data` replaced; unknown sections or keys are errors."""
    out = {section: dict(keys) for section, keys in base.items()}
    for section, keys in data.items():
        if section not in _SCHEMA or not isinstance(keys, dict):
            raise DiagError(f"{name}: unknown policy section {section!r} (one of {', '.join(_SCHEMA)})")
        for key, value in keys.items():
            if key not in _SCHEMA[section]:
                raise DiagError(f"{name}: unknown key {section}.{key} (one of {', '.join(_SCHEMA[section])})")
            out.setdefault(section, {})[key] = (name, value)
    return out


def _policy(name: str, merged: dict[str, Any]) -> Policy:
    """Check every value of the merged policy; DiagError names the file and the key."""
    values: dict[str, Any] = {}
    for section, keys in _SCHEMA.items():
        for key, kind in keys.items():
            if key not in merged.get(section, {}):
                raise DiagError(f"{name}: missing policy key {section}.{key}")
            source, value = merged[section][key]
            values[key] = _checked(f"{source}: {section}.{key}", kind, value)
    if values["weak_score"] > values["strong_score"]:
        raise DiagError(f"{name}: verdict.weak_score must not exceed verdict.strong_score")
    if sorted(values["priority"]) != sorted(LABELS):
        missing = sorted(set(LABELS) - set(values["priority"]))
        problem = f"lacks {', '.join(missing)}" if missing else "names a label twice"
        raise DiagError(f"{name}: labels.priority must list every label once; it {problem}")
    return Policy(primary_min=values["primary_min"], strong_score=values["strong_score"],
                  weak_score=values["weak_score"], min_steady_s=values["min_seconds"],
                  min_steady_calls=values["min_calls"], min_trace_calls=values["min_trace_calls"],
                  idle_busy_max=values["busy_max"], priority=values["priority"],
                  no_steady_needed=values["no_steady_needed"], close_margin=values["close_margin"],
                  breakers=values["breaker"])


def _checked(where: str, kind: str, value: Any) -> Any:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "share" and not (number and 0 <= value <= 1):
        raise DiagError(f"{where} must be a number from 0 to 1, not {value!r}")
    if kind == "number" and not (number and value >= 0):
        raise DiagError(f"{where} must be a number >= 0, not {value!r}")
    if kind == "count" and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise DiagError(f"{where} must be a whole number >= 0, not {value!r}")
    if kind == "labels":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DiagError(f"{where} must be a list of labels")
        unknown = [v for v in value if v not in LABELS]
        if unknown:
            raise DiagError(f"{where}: unknown label {unknown[0]!r} (one of {', '.join(LABELS)})")
        return tuple(value)
    if kind == "breakers":
        return _breakers(where, value)
    return float(value) if kind in ("share", "number") else value


def _breakers(where: str, value: Any) -> tuple[TieBreaker, ...]:
    """[[ties.breaker]] tables: labels (two), prefer (one of them), when (an expression), why (text)."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise DiagError(f"{where} must be a list of tables ([[ties.breaker]])")
    out = []
    for i, b in enumerate(value):
        at = f"{where}[{i}]"
        extra = sorted(set(b) - {"labels", "prefer", "when", "why"})
        if extra:
            raise DiagError(f"{at}: unknown key {extra[0]!r} (labels, prefer, when, why)")
        labels = b.get("labels")
        if not (isinstance(labels, list) and len(labels) == 2 and labels[0] in LABELS
                and (labels[1] in LABELS or labels[1] == "*") and labels[0] != labels[1]):
            raise DiagError(f"{at}.labels must name two different labels (the second may be \"*\": any other)")
        if b.get("prefer") not in labels or b.get("prefer") == "*":
            raise DiagError(f"{at}.prefer must be one of its labels")
        if not isinstance(b.get("why"), str) or not b["why"].strip():
            raise DiagError(f"{at}.why must say which evidence separates the labels")
        try:
            when = compile_expr(b.get("when"), BY_NAME.keys())
        except ValueError as exc:
            raise DiagError(f"{at}.when: {exc}") from None
        out.append(TieBreaker((labels[0], labels[1]), b["prefer"], when, b["why"].strip()))
    return tuple(out)
