"""The verdict policy (rules/policy.toml): every label ranked, bad content one line, --rules DIR overrides."""

from __future__ import annotations

import sys
import textwrap

import analysis_fixtures as F
import pytest

from diag.engine import diagnose
from diag.engine.diagnosis import LABEL_MEANING, LABELS
from diag.engine.policy import builtin_policy, builtin_policy_text, load_policy
from diag.engine.rules import builtin_rule_files, load_rules
from diag.errors import DiagError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_label_has_a_priority_and_a_meaning():
    policy = builtin_policy()
    for label in LABELS:
        assert policy.rank(label) >= 0
        assert LABEL_MEANING[label]
    assert "communication_bound" in LABELS


def test_policy_file_labels_are_exactly_the_labels():
    raw = tomllib.loads(builtin_policy_text()[1])["labels"]
    assert sorted(raw["priority"]) == sorted(LABELS)
    assert set(raw["no_steady_needed"]) <= set(LABELS)


def test_policy_file_is_not_a_rule_file():
    assert builtin_policy_text()[0] == "rules/policy.toml"
    assert "rules/policy.toml" not in [name for name, _ in builtin_rule_files()]


@pytest.mark.parametrize("text, problem", [
    ("[verdict]\nstrong_score = 2\n", "verdict.strong_score must be a number from 0 to 1"),
    ("[verdict]\nweak_score = 0.9\n", "weak_score must not exceed verdict.strong_score"),
    ("[steady]\nmin_calls = 2.5\n", "steady.min_calls must be a whole number"),
    ("[steady]\nmin_seconds = \"long\"\n", "steady.min_seconds must be a number"),
    ("[steady]\nmin_sekonds = 1\n", "unknown key steady.min_sekonds"),
    ("[verdicts]\nx = 1\n", "unknown policy section 'verdicts'"),
    ('[labels]\npriority = ["queueing"]\n', "labels.priority must list every label once; it lacks"),
    ('[labels]\nno_steady_needed = ["slow"]\n', "unknown label 'slow'"),
    ("[verdict\n", "not valid TOML"),
])
def test_bad_policy_is_one_line_error_naming_the_file(tmp_path, text, problem):
    (tmp_path / "policy.toml").write_text(text)
    with pytest.raises(DiagError) as err:
        load_policy([str(tmp_path)])
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "policy.toml") in msg
    assert problem in msg, msg


def test_user_policy_overrides_only_its_keys(tmp_path):
    (tmp_path / "policy.toml").write_text("[steady]\nmin_seconds = 1000\n")
    policy = load_policy([str(tmp_path)])
    assert policy.min_steady_s == 1000
    assert policy.min_steady_calls == builtin_policy().min_steady_calls
    assert [r.id for r in load_rules([str(tmp_path)])] == [r.id for r in load_rules()]  # only a policy: fine
    run = F.cpu_compute(str(tmp_path / "run"))
    assert diagnose(run).primary == "compute_bound"
    d = diagnose(run, rule_dirs=[str(tmp_path)])
    assert d.primary is None
    assert d.findings[0].rule == "verdict.insufficient_evidence"
    assert "needs 1000 s" in d.findings[0].title


TIE = textwrap.dedent("""
    [[rule]]
    id = "mine.{label}"
    label = "{label}"
    title = "tie"
    when = "steady.steps > 0"
    score = "1"
    evidence = ["steady.steps"]

    [[rule.recommendation]]
    text = "none"
""")


def test_priority_breaks_ties_and_can_be_overridden(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "tie.toml").write_text(TIE.format(label="io_bound") + TIE.format(label="cpu_bound"))
    run = F.cpu_compute(str(tmp_path / "run"))
    (rules / "policy.toml").write_text("[ties]\nclose_margin = 0\n")  # no evidence-based tie-breaks
    d = diagnose(run, rule_dirs=[str(rules)])
    assert d.scores["io_bound"] == d.scores["cpu_bound"] and d.primary == "io_bound"
    order = [lb for lb in builtin_policy().priority if lb != "cpu_bound"]
    (rules / "policy.toml").write_text(f"[ties]\nclose_margin = 0\n[labels]\npriority = {['cpu_bound', *order]!r}\n")
    assert diagnose(run, rule_dirs=[str(rules)]).primary == "cpu_bound"
