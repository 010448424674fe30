"""Rule files: built-ins load, malformed files fail with the file and the problem, --rules adds rules."""

from __future__ import annotations

import textwrap

import analysis_fixtures as F
import pytest

from diag.engine import diagnose
from diag.engine.diagnosis import LABELS
from diag.engine.rules import builtin_rule_files, load_rules, parse_rule_file
from diag.errors import DiagError

GOOD = """
[[rule]]
id = "mine.slow_steps"
label = "cpu_bound"
title = "Steps take {steady.step_p50_ms:.1f} ms"
when = "steady.step_p50_ms > 5"
score = "0.99"
evidence = ["steady.step_p50_ms"]

[[rule.recommendation]]
text = "Make steps faster than {steady.step_p50_ms:.0f} ms"
code = "pass"
gain = "steady.step_p50_ms / 5"
expected_gain = "at most {gain:.1f}x"
"""


def test_builtin_rules_load_and_cover_every_label():
    rules = load_rules()
    assert len(builtin_rule_files()) >= 8
    labels = {r.label for r in rules if r.label}
    assert labels == set(LABELS)
    assert len({r.id for r in rules}) == len(rules)
    for r in rules:
        assert r.recommendations, f"{r.id} has no recommendation"


@pytest.mark.parametrize("mutate, problem", [
    (lambda t: t.replace('label = "cpu_bound"', 'label = "slow"'), "unknown label 'slow'"),
    (lambda t: t.replace('when = "steady.step_p50_ms > 5"\n', ""), "missing required key 'when'"),
    (lambda t: t.replace('id = "mine.slow_steps"\n', ""), "missing required key 'id'"),
    (lambda t: t.replace("steady.step_p50_ms > 5", "steady.step_p50_ms >"), "cannot parse"),
    (lambda t: t.replace("steady.step_p50_ms > 5", "steady.step_p5O_ms > 5"), "unknown metric 'steady.step_p5O_ms'"),
    (lambda t: t.replace('evidence = ["steady.step_p50_ms"]', 'evidence = ["x.y"]'), "evidence names unknown metric 'x.y'"),
    (lambda t: t.replace('title = "Steps take {steady.step_p50_ms:.1f} ms"', 'title = "{steady.typo}"'), "unknown metric 'steady.typo' in template"),
    (lambda t: t.replace('title = "Steps take {steady.step_p50_ms:.1f} ms"', 'title = "{oops"'), "bad template"),
    (lambda t: t.replace('score = "0.99"', 'score = "0.99"\ncolour = "red"'), "unknown key 'colour'"),
    (lambda t: t.replace('score = "0.99"', 'score = "0.99"\nseverity = "urgent"'), "unknown severity"),
    (lambda t: t.replace('text = "Make', 'txt = "Make'), "needs text"),
    (lambda t: t.replace("[[rule]]", "[[rules]]"), "unknown top-level key 'rules'"),
    (lambda t: t + "\n[[rule", "not valid TOML"),
    (lambda t: t.replace('gain = "steady.step_p50_ms / 5"', 'gain = "eval(1)"'), "unknown function"),
])
def test_malformed_rule_files_name_the_file_and_problem(tmp_path, mutate, problem):
    path = tmp_path / "mine.toml"
    path.write_text(mutate(GOOD))
    with pytest.raises(DiagError) as err:
        load_rules([str(tmp_path)])
    msg = str(err.value)
    assert str(path) in msg
    assert problem in msg, msg


def test_empty_file_and_bad_directory(tmp_path):
    with pytest.raises(DiagError, match="no \\[\\[rule\\]\\] tables"):
        parse_rule_file("x.toml", "")
    with pytest.raises(DiagError, match="not a directory"):
        load_rules([str(tmp_path / "missing")])
    with pytest.raises(DiagError, match="no .toml rule files"):
        load_rules([str(tmp_path)])


def test_duplicate_rule_id_is_an_error(tmp_path):
    (tmp_path / "dup.toml").write_text(GOOD.replace("mine.slow_steps", "transfer.copies_dominate"))
    with pytest.raises(DiagError, match="already defined in rules/transfer.toml"):
        load_rules([str(tmp_path)])


def test_user_rules_add_findings_and_can_win(tmp_path):
    (tmp_path / "mine.toml").write_text(GOOD)
    run = F.cpu_compute(str(tmp_path / "run"))
    base = diagnose(run)
    assert base.primary == "compute_bound"
    mine = diagnose(run, rule_dirs=[str(tmp_path)])
    f = next(f for f in mine.findings if f.rule == "mine.slow_steps")
    assert f.title == "Steps take 19.0 ms"
    assert f.recommendations[0].expected_gain == "at most 3.8x"
    assert mine.scores["cpu_bound"] == pytest.approx(0.99 * (1 - mine.metrics["coldstart.share"]), abs=1e-3)


def test_advice_rule_without_label(tmp_path):
    text = textwrap.dedent("""
        [[rule]]
        id = "mine.note"
        title = "note"
        when = "steady.steps > 0"
        evidence = ["steady.steps"]
    """)
    (tmp_path / "n.toml").write_text(text)
    d = diagnose(F.cpu_compute(str(tmp_path / "run")), rule_dirs=[str(tmp_path)])
    f = next(f for f in d.findings if f.rule == "mine.note")
    assert f.label is None and f.severity == "high"
    assert d.primary == "compute_bound"


def test_docs_rules_md_is_in_sync():
    import pathlib

    from diag.engine.docs import rules_markdown

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "rules.md"
    assert path.read_text() == rules_markdown(), "regenerate: python -m diag.engine.docs"


def test_every_link_points_at_a_rules_md_anchor():
    from diag.engine.docs import rules_markdown

    text = rules_markdown()
    for rule in load_rules():
        for rec in rule.recommendations:
            page, _, frag = rec.link.partition("#")
            assert page == "docs/rules.md" and f'<a id="{frag}"></a>' in text, rec.link
