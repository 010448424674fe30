"""Safe expressions and templates."""

from __future__ import annotations

import pytest

from diag.engine.evaluate import amdahl, compile_expr, limit, ramp, render, template_fields

KNOWN = {"steady.copy_share", "steady.gpu_busy", "steady.batch_p50"}


def test_dotted_metric_names_evaluate():
    e = compile_expr("steady.copy_share >= 0.3 and steady.gpu_busy < 0.6", KNOWN)
    assert e({"steady.copy_share": 0.5, "steady.gpu_busy": 0.2}) is True
    assert e({"steady.copy_share": 0.1, "steady.gpu_busy": 0.2}) is False
    assert e.metrics == {"steady.copy_share", "steady.gpu_busy"}


def test_missing_metric_means_no_value_not_a_crash():
    e = compile_expr("steady.copy_share >= 0.3", KNOWN)
    assert e({}) is None
    assert e({"steady.copy_share": None}) is None
    assert e({"steady.copy_share": float("nan")}) is None


def test_value_and_has_read_optional_metrics():
    e = compile_expr("value('steady.gpu_busy', 0) < 0.5 and not has('steady.batch_p50')", KNOWN)
    assert e({}) is True
    assert e({"steady.gpu_busy": 0.9}) is False
    assert e.metrics == frozenset() and e.optional == {"steady.gpu_busy", "steady.batch_p50"}


def test_numbers_and_strings_are_not_taken_for_metrics():
    e = compile_expr("steady.copy_share * 1.5e0 + 0.25", KNOWN)
    assert e({"steady.copy_share": 0.5}) == pytest.approx(1.0)


def test_helpers():
    assert ramp(0.5, 0.0, 1.0) == 0.5 and ramp(-1, 0, 1) == 0 and ramp(2, 0, 1) == 1
    assert limit(0.5) == pytest.approx(2.0)
    assert amdahl(0.5, 2) == pytest.approx(1 / 0.75)
    e = compile_expr("ramp(steady.copy_share, 0.1, 0.5)", KNOWN)
    assert e({"steady.copy_share": 0.3}) == pytest.approx(0.5)


@pytest.mark.parametrize("expr, problem", [
    ("steady.nope > 1", "unknown metric 'steady.nope'"),
    ("copy_share > 1", "unknown name 'copy_share'"),
    ("steady.copy_share >", "cannot parse"),
    ("__import__('os').system('true')", "unknown function"),
    ("steady.copy_share.__class__", "unknown metric"),
    ("().__class__", "unsupported syntax"),
    ("[x for x in (1, 2)]", "unsupported syntax"),
    ("open('/etc/passwd')", "unknown function"),
    ("value(steady.copy_share)", "quoted metric name"),
    ("value('steady.nope', 1) > 0", "unknown metric 'steady.nope'"),
    ("", "empty expression"),
])
def test_bad_expressions_are_refused(expr, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        compile_expr(expr, KNOWN)


def test_runtime_errors_give_none():
    e = compile_expr("1 / steady.copy_share", KNOWN)
    assert e({"steady.copy_share": 0.0}) is None
    big = compile_expr("10 ** steady.copy_share", KNOWN)
    assert big({"steady.copy_share": 10**9}) is None  # simpleeval refuses huge powers


def test_render_templates_with_metric_names():
    text = render("copies take {steady.copy_share:.0%}, {steady.batch_p50:.0f} per batch, gain {gain:.1f}x",
                  {"steady.copy_share": 0.423, "steady.batch_p50": 8.0, "gain": 1.73})
    assert text == "copies take 42%, 8 per batch, gain 1.7x"
    assert render("{steady.gpu_busy:.0%}", {"steady.gpu_busy": None}) == "n/a"


def test_render_unit_spec_prints_as_the_views_do():
    vals = {"steady.pre_handler_wait_mean_ms": 4513.0, "steady.handler_p50_ms": 0.42, "steady.gpu_busy": 0.214,
            "gain": 2.0}
    text = render("wait {steady.pre_handler_wait_mean_ms:unit}, served in {steady.handler_p50_ms:unit}, "
                  "busy {steady.gpu_busy:unit}, {gain:unit}, {steady.gpu_busy!r}", vals)
    assert text == f"wait 4.51 s, served in 420 µs, busy 21.4%, 2, {0.214!r}"
    assert render("{steady.handler_p50_ms:unit}", {"steady.handler_p50_ms": None}) == "n/a"
    assert template_fields("{steady.handler_p50_ms:unit}") == ["steady.handler_p50_ms"]
