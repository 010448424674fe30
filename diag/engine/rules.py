"""Rule files (TOML): loading and validation.

A rule file holds `[[rule]]` tables:

    [[rule]]
    id = "transfer.pageable_copies"        # unique
    label = "transfer_bound"               # optional: the label it backs (else advice only)
    title = "Copies take {steady.copy_share:.0%} of the steady state"
    when = "steady.copy_share >= 0.25"     # condition over metrics
    score = "ramp(steady.copy_share, 0.15, 0.5)"   # optional, in [0, 1]; default 1
    severity = "high"                      # optional: info|low|medium|high; else from the score
    evidence = ["steady.copy_share", "steady.copy_pageable_fraction"]
    fallback = false                       # optional: true = shown only if no other rule backs the label

    [[rule.recommendation]]
    text = "Pin the host buffer ({steady.copy_bytes_per_step:,.0f} B per step) ..."
    code = "x = x.pin_memory().to('cuda', non_blocking=True)"
    gain = "limit(steady.copy_share)"      # optional expression: the value `gain` (JSON: gain_max)
    expected_gain = "at most {gain:.2f}x"  # template; may use {gain}
    predict = "amdahl(steady.copy_share, 2.5)"  # optional: a point prediction (JSON: gain_point)
    gain_on = "throughput"                 # optional: throughput | request_latency | wall_time
    link = "docs/rules.md#transfer-pageable-copies"
    when = "steady.copy_pageable_fraction > 0.5"   # optional extra condition

Templates (title, text, expected_gain) take Python format specs, or `unit`:
`{steady.handler_p50_ms:unit}` prints the value as every view prints its
metric's unit (`4.51 s` for 4513 ms, `420 µs`, `21.4%`; diag.analysis.units).

An evidence item's threshold (`{ metric = "m", threshold = ">= 0.2" }`) is
derived from `when` wherever `when` compares the metric with a number in one
of its top-level `and` terms; a plain metric name gets it, and an explicit
threshold must say the same.

Built-in rules ship as the package `diag._rules` (the repository's rules/
directory); `--rules DIR` adds every *.toml in DIR but policy.toml, the
verdict policy (diag.engine.policy).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from diag.analysis.metrics import BY_NAME
from diag.analysis.serving import NAMES
from diag.engine.diagnosis import LABELS, SEVERITIES
from diag.engine.evaluate import Expr, bound_text, bounds, compile_expr, parse_bound, template_fields
from diag.errors import DiagError
from diag.store.safe import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# names a template may use besides metrics
TEMPLATE_EXTRAS = ("gain", "score")
# Not a rule file: the verdict policy (diag.engine.policy), beside the rules.
POLICY_FILE = "policy.toml"
RULE_KEYS = {"id", "label", "title", "when", "score", "severity", "evidence", "recommendation", "fallback"}
REC_KEYS = {"text", "code", "gain", "expected_gain", "link", "when", "predict", "gain_on"}
# what a recommendation's gain speeds up (Recommendation.gain_on); without `gain_on` it is read from
# expected_gain's words: "wall time" -> wall_time, "latency" -> request_latency, else throughput
GAIN_ON = ("throughput", "request_latency", "wall_time")


@dataclass
class RecommendationSpec:
    text: str
    code: str = ""
    gain: Expr | None = None
    expected_gain: str = ""
    link: str = ""
    when: Expr | None = None
    predict: Expr | None = None  # a point prediction of the gain, where the data allows one
    gain_on: str = "throughput"


def gain_target(expected_gain: str) -> str:
    """What a gain template speaks of, from its words (see GAIN_ON)."""
    text = expected_gain.lower()
    return "wall_time" if "wall time" in text else "request_latency" if "latency" in text else "throughput"


@dataclass
class EvidenceSpec:
    metric: str
    threshold: str = ""


@dataclass
class Rule:
    id: str
    label: str | None
    title: str
    when: Expr
    score: Expr | None
    severity: str | None
    evidence: list[EvidenceSpec]
    recommendations: list[RecommendationSpec] = field(default_factory=list)
    source: str = ""
    fallback: bool = False  # shown only when no other rule backs its label


def rules_root() -> Any:
    """The directory of the built-in rules (and of the built-in policy file)."""
    try:
        return resources.files("diag._rules")
    except ModuleNotFoundError:
        # an editable install made before rules/ was mapped: read it from the checkout
        return Path(__file__).resolve().parents[2] / "rules"


def _is_rule_file(name: str) -> bool:
    return name.endswith(".toml") and name != POLICY_FILE


def builtin_rule_files() -> list[tuple[str, str]]:
    """(name, text) of every built-in rule file."""
    files = sorted((p for p in rules_root().iterdir() if _is_rule_file(p.name)), key=lambda p: p.name)
    return [(f"rules/{p.name}", p.read_text(encoding="utf-8")) for p in files]


def load_rules(rule_dirs: tuple[str, ...] | list[str] = ()) -> list[Rule]:
    """Built-in rules plus the *.toml rule files of each directory in `rule_dirs`.

    A directory's policy.toml is no rule file (diag.engine.policy reads it); a
    directory must hold rule files, a policy file, or both.
    """
    files = builtin_rule_files()
    for d in rule_dirs:
        if not os.path.isdir(d):
            raise DiagError(f"--rules {d}: not a directory")
        paths = sorted(p for p in Path(d).glob("*.toml") if _is_rule_file(p.name))
        if not paths and not (Path(d) / POLICY_FILE).is_file():
            raise DiagError(f"--rules {d}: no .toml rule files in it")
        files += [(str(p), read_text(str(p))) for p in paths]  # regular UTF-8 files, size-capped
    rules: list[Rule] = []
    seen: dict[str, str] = {}
    for name, text in files:
        for rule in parse_rule_file(name, text):
            if rule.id in seen:
                raise DiagError(f"{name}: rule {rule.id!r} already defined in {seen[rule.id]}")
            seen[rule.id] = name
            rules.append(rule)
    return rules


def parse_rule_file(name: str, text: str) -> list[Rule]:
    """Parse and validate one rule file; DiagError names the file, the rule and the problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DiagError(f"{name}: not valid TOML ({exc})") from None
    extra = set(data) - {"rule"}
    if extra:
        raise DiagError(f"{name}: unknown top-level key {sorted(extra)[0]!r} (rules go in [[rule]] tables)")
    raw = data.get("rule")
    if not isinstance(raw, list) or not raw:
        raise DiagError(f"{name}: no [[rule]] tables")
    rules = []
    for i, r in enumerate(raw):
        if not isinstance(r, dict):
            raise DiagError(f"{name}: rule #{i + 1} is not a table (write [[rule]] tables)")
        try:
            rules.append(_rule(name, i, r))
        except (TypeError, AttributeError, RecursionError) as exc:  # a type no check above foresaw
            raise DiagError(f"{name}: rule #{i + 1}: a value of the wrong type ({exc.__class__.__name__})") from None
    return rules


def _rule(name: str, index: int, r: dict[str, Any]) -> Rule:
    rid = r.get("id")
    where = f"{name}: rule {rid if isinstance(rid, str) and len(rid) < 80 else f'#{index + 1}'!r}"

    def fail(problem: str) -> DiagError:
        return DiagError(f"{where}: {problem}")

    for key in ("id", "title", "when", "evidence"):
        if key not in r:
            raise fail(f"missing required key {key!r}")
    unknown = set(r) - RULE_KEYS
    if unknown:
        raise fail(f"unknown key {sorted(unknown)[0]!r}")
    if not isinstance(r["id"], str) or not r["id"]:
        raise fail("id must be a non-empty string")
    for key in ("when", "score", "label", "severity"):
        if key in r and not isinstance(r[key], str) and not (key == "score" and isinstance(r[key], (int, float))):
            raise fail(f"{key} must be a string")
    label = r.get("label")
    if label is not None and label not in LABELS:
        raise fail(f"unknown label {label!r} (one of {', '.join(LABELS)})")
    severity = r.get("severity")
    if severity is not None and severity not in SEVERITIES:
        raise fail(f"unknown severity {severity!r} (one of {', '.join(SEVERITIES)})")
    known = BY_NAME.keys()
    try:
        when = compile_expr(r["when"], known)
        score = compile_expr(str(r["score"]), known) if "score" in r else None
    except ValueError as exc:
        raise fail(str(exc)) from None
    evidence = []
    items = r["evidence"]
    if not isinstance(items, list) or not items:
        raise fail("evidence must be a non-empty list of metric names")
    derived = bounds(when)
    for item in items:
        metric, threshold = (item, "") if isinstance(item, str) else (
            (item.get("metric"), str(item.get("threshold", ""))) if isinstance(item, dict) else (None, ""))
        if not isinstance(metric, str) or metric not in known:
            raise fail(f"evidence names unknown metric {metric!r}")
        if metric in derived:
            # the threshold shown is the one `when` applies: typed once, or checked equal
            if threshold and parse_bound(threshold) != derived[metric]:
                raise fail(f"evidence {metric} threshold {threshold!r} differs from when "
                           f"({bound_text(derived[metric])!r}); leave it out, it is derived from when")
            threshold = bound_text(derived[metric])
        evidence.append(EvidenceSpec(metric, threshold))
    _check_template(fail, "title", r["title"])
    recs = []
    if not isinstance(r.get("recommendation", []), list):
        raise fail("recommendation must be [[rule.recommendation]] tables")
    for rec in r.get("recommendation", []):
        if not isinstance(rec, dict) or "text" not in rec:
            raise fail("each [[rule.recommendation]] needs text")
        unknown = set(rec) - REC_KEYS
        if unknown:
            raise fail(f"unknown recommendation key {sorted(unknown)[0]!r}")
        bad = next((k for k in REC_KEYS if k in rec and not isinstance(rec[k], str)), None)
        if bad:
            raise fail(f"recommendation {bad} must be a string")
        try:
            gain = compile_expr(rec["gain"], known) if "gain" in rec else None
            rwhen = compile_expr(rec["when"], known) if "when" in rec else None
            predict = compile_expr(rec["predict"], known) if "predict" in rec else None
        except ValueError as exc:
            raise fail(str(exc)) from None
        gain_on = rec.get("gain_on") or gain_target(rec.get("expected_gain", ""))
        if gain_on not in GAIN_ON:
            raise fail(f"gain_on must be one of {', '.join(GAIN_ON)}")
        _check_template(fail, "text", rec["text"])
        _check_template(fail, "expected_gain", rec.get("expected_gain", ""))
        recs.append(RecommendationSpec(rec["text"], str(rec.get("code", "")), gain,
                                       str(rec.get("expected_gain", "")),
                                       str(rec.get("link", "")) or f"docs/rules.md#{anchor(r['id'])}", rwhen,
                                       predict, gain_on))
    fallback = r.get("fallback", False)
    if not isinstance(fallback, bool) or (fallback and not label):
        raise fail("fallback must be true or false, and a fallback rule needs a label")
    return Rule(r["id"], label, r["title"], when, score, severity, evidence, recs, name, fallback)


def anchor(rule_id: str) -> str:
    """The docs/rules.md anchor of a rule."""
    return rule_id.replace(".", "-").replace("_", "-").lower()


def _check_template(fail: Any, key: str, template: Any) -> None:
    if not isinstance(template, str):
        raise fail(f"{key} must be a string")
    try:
        fields = template_fields(template)
    except ValueError as exc:
        raise fail(f"{key}: bad template ({exc})") from None
    for f in fields:
        if f not in BY_NAME and f not in TEMPLATE_EXTRAS and f not in NAMES:
            raise fail(f"{key}: unknown metric {f!r} in template")
