"""The option table is the one source of every profile option's default and flag."""

from __future__ import annotations

import dataclasses

import pytest

from diag.cli import build_parser, main
from diag.collect import kernel_windows, options, recorder
from diag.collect.profile import ProfileOptions, _kernel_status
from diag.errors import DiagError


def _profile_args(argv: list[str]):  # noqa: ANN202
    args, _ = build_parser().parse_known_args(["profile", *argv])
    return args


def test_cli_defaults_equal_profile_defaults_equal_table() -> None:
    args = _profile_args([])
    fields = {f.name: f.default for f in dataclasses.fields(ProfileOptions)}
    flagged = [o for o in options.OPTIONS if o.flag is not None]
    assert flagged
    for o in flagged:
        assert getattr(args, o.name) == o.default == fields[o.name], o.name
    # every ProfileOptions field (but the run's own out/extra) is an option with a flag
    assert set(fields) - {"out", "extra"} == {o.name for o in flagged}


def test_target_defaults_come_from_the_table() -> None:
    target = options.defaults("target")
    assert recorder.DEFAULT_OPTIONS == target
    assert kernel_windows.DEFAULTS == {k: v for k, v in target.items() if k.startswith("kernel_window")}
    s = kernel_windows.WindowScheduler(installed_at=0.0)
    assert (s.windows, s.steps, s.max_s) == (target["kernel_windows"], target["kernel_window_steps"],
                                               target["kernel_window_max_s"])


def test_flags_set_their_option() -> None:
    args = _profile_args(["--no-gpu", "--kernel-windows", "0", "--grace", "1.5"])
    assert (args.gpu, args.kernel_windows, args.grace_s, args.stacks) == (False, 0, 1.5, True)


def test_off_reason_names_the_flag() -> None:
    assert options.off_reason("gpu") == "turned off by --no-gpu"
    assert _kernel_status("/nonexistent", ProfileOptions(kernel_windows=0)) == {
        "status": "off", "reason": "turned off by --kernel-windows 0"}
    assert _kernel_status("/nonexistent", ProfileOptions(hooks=False))["reason"] == "turned off by --no-hooks"


NUMERIC = [o for o in options.OPTIONS if o.type in (int, float)]
BAD = ["nan", "inf", "-inf", "-1", "1e12", "abc", ""]


def test_every_numeric_option_has_a_range() -> None:
    assert {"duration_s", "host_interval_s", "grace_s"} <= {o.name for o in NUMERIC}
    for o in NUMERIC:
        assert o.min is not None and o.max is not None and o.min <= o.max, o.name
        assert o.default is None or o.min <= o.default <= o.max, o.name


@pytest.mark.parametrize("opt", [o for o in NUMERIC if o.flag], ids=lambda o: o.flag)
@pytest.mark.parametrize("bad", BAD)
def test_bad_numbers_are_one_line_errors(opt, bad: str, tmp_path, capsys) -> None:  # noqa: ANN001
    out = tmp_path / "run"
    assert main(["profile", "--out", str(out), opt.flag, bad, "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("diag: ") and opt.flag in err and "Traceback" not in err
    assert not out.exists()  # nothing ran, nothing was created


@pytest.mark.parametrize("opt", NUMERIC, ids=lambda o: o.name)
def test_the_table_checks_values_given_without_a_flag(opt) -> None:  # noqa: ANN001
    for bad in (float("nan"), float("inf"), opt.min - 1, opt.max * 2 + 1):
        with pytest.raises(DiagError):
            options.check(opt.name, bad)
    assert options.check(opt.name, opt.min) == opt.min


def test_zero_host_interval_and_negative_duration_are_refused(capsys) -> None:
    assert main(["profile", "--host-interval", "0", "--", "true"]) == 2
    assert main(["profile", "--duration", "-1", "--", "true"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("diag: --host-interval 0: ") and lines[1].startswith("diag: --duration -1: ")


def test_set_passes_a_target_option_without_a_flag_and_refuses_the_rest(capsys) -> None:  # noqa: ANN001
    from diag.collect.profile import target_env

    args = build_parser().parse_args(["profile", "--set", "copies=false", "--set", "detail-rows=500"])
    assert dict(args.settings) == {"copies": False, "detail_rows": 500}
    env = target_env("/tmp/r", ProfileOptions(extra=dict(args.settings)))
    assert '"copies": false' in env["DIAG_OPTIONS"] and '"detail_rows": 500' in env["DIAG_OPTIONS"]
    for bad in ("copies", "nope=1", "copies=maybe", "detail_rows=-1", "stack_rate_hz=5"):
        assert main(["profile", "--set", bad, "--", "true"]) != 0
        err = capsys.readouterr().err.strip()
        assert err.startswith("diag: --set") and "\n" not in err
