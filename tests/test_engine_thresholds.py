"""Evidence thresholds come from `when`: derived where it compares the metric with a number, else checked equal."""

from __future__ import annotations

import glob
import os

import pytest

from diag.analysis.metrics import BY_NAME
from diag.engine.evaluate import bound_text, bounds, compile_expr, parse_bound
from diag.engine.rules import load_rules, parse_rule_file
from diag.errors import DiagError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bounds(source: str) -> dict[str, str]:
    return {m: bound_text(c) for m, c in bounds(compile_expr(source, BY_NAME)).items()}


def test_bounds_read_top_level_comparisons_with_numbers():
    assert _bounds("run.gpu == 1 and steady.copy_share >= 0.05 and steady.copy_share < 0.2 "
                   "and value('steady.gpu_busy', 0) < 0.75 and 0.3 <= steady.sm_active") == {
        "run.gpu": "== 1", "steady.copy_share": ">= 0.05 and < 0.2", "steady.gpu_busy": "< 0.75",
        "steady.sm_active": ">= 0.3"}
    assert _bounds("steady.gpu_busy > 0.5") == {"steady.gpu_busy": "> 0.5"}
    # under or/not, or against another metric: no threshold of its own
    assert _bounds("steady.gpu_busy > 0.5 or steady.sm_active < 0.2") == {}
    assert _bounds("not steady.gpu_busy > 0.5") == {}
    assert _bounds("steady.outside_busy_share >= 0.7 * steady.inside_model_share") == {}


def test_parse_bound_round_trips_and_leaves_free_text():
    assert parse_bound(">= 0.2") == [(">=", 0.2)]
    assert parse_bound(">=0.20 and < 1") == [(">=", 0.2), ("<", 1.0)]
    assert parse_bound("high") is None


RULE = """
[[rule]]
id = "mine.copies"
label = "transfer_bound"
title = "copies"
when = "steady.copy_share >= 0.3 and has('steady.gpu_busy')"
evidence = [{evidence}, "steady.gpu_busy"]

[[rule.recommendation]]
text = "pin"
"""


@pytest.mark.parametrize("evidence, threshold", [
    ('"steady.copy_share"', ">= 0.3"),                                         # derived
    ('{ metric = "steady.copy_share", threshold = ">= 0.3" }', ">= 0.3"),      # explicit, equal
    ('{ metric = "steady.copy_share", threshold = ">= 0.30" }', ">= 0.3"),     # explicit, same number
])
def test_threshold_derived_or_checked_equal(evidence, threshold):
    (rule,) = parse_rule_file("mine.toml", RULE.format(evidence=evidence))
    assert [(e.metric, e.threshold) for e in rule.evidence] == [("steady.copy_share", threshold),
                                                                 ("steady.gpu_busy", "")]


def test_explicit_threshold_that_differs_from_when_is_an_error():
    text = RULE.format(evidence='{ metric = "steady.copy_share", threshold = ">= 0.25" }')
    with pytest.raises(DiagError, match=r"mine.toml: rule 'mine.copies': evidence steady.copy_share "
                                        r"threshold '>= 0.25' differs from when \('>= 0.3'\)"):
        parse_rule_file("mine.toml", text)


def test_explicit_threshold_without_a_comparison_is_kept():
    text = RULE.format(evidence='{ metric = "steady.copy_pageable_fraction", threshold = "most" }')
    (rule,) = parse_rule_file("mine.toml", text)
    assert rule.evidence[0].threshold == "most"


def test_builtin_rules_type_no_threshold_that_when_gives():
    for path in glob.glob(os.path.join(ROOT, "rules", "*.toml")):
        with open(path, encoding="utf-8") as f:
            assert "threshold = " not in f.read(), f"{path}: let the threshold come from when"
    rule = next(r for r in load_rules() if r.id == "transfer.copies_dominate")
    assert rule.evidence[0].metric == "steady.copy_share" and rule.evidence[0].threshold == ">= 0.2"
