"""The option table is the one source of every profile option's default and flag."""

from __future__ import annotations

import dataclasses

from diag.cli import build_parser
from diag.collect import kernel_windows, options, recorder
from diag.collect.profile import ProfileOptions, _kernel_status


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
    # every ProfileOptions field (but the run's own out/duration/extra) is an option with a flag
    assert set(fields) - {"out", "duration_s", "extra"} == {o.name for o in flagged}


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
