"""The `diag` command line: profile, analyze, tui, report, demo.

`main(argv) -> int` never lets a traceback reach the user: DiagError becomes
one line on stderr and its exit code, so tests can call main([...]) directly.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from diag.errors import DiagError
from diag.store.importers import formats_text


def _split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split `diag profile [opts] -- CMD ...` at the first `--`."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def _add_analysis_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", action="append", default=[], metavar="DIR", help="extra rule files (*.toml) to load")


def _add_profile_options(p: argparse.ArgumentParser) -> None:
    """One flag per option of the option table that has one (diag/collect/options.py)."""
    from diag.collect.options import OPTIONS, parse, parse_setting

    for o in OPTIONS:
        if o.flag is None:
            continue
        if o.switch:
            p.add_argument(o.flag, dest=o.name, action="store_false", help=o.help)
        elif o.flag_on:
            p.add_argument(o.flag, dest=o.name, action="store_true", help=o.help)
        else:
            p.add_argument(o.flag, dest=o.name, type=functools.partial(parse, o.name), default=o.default,
                           metavar=o.metavar, help=o.help)
    p.add_argument("--set", dest="settings", action="append", type=parse_setting, default=[], metavar="NAME=VALUE",
                   help="a recording option without a flag of its own, e.g. copies=false, table_rows=20000 "
                        "(a wrong NAME lists them)")


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line is one line (DiagError, exit 2), not usage and a message."""

    def error(self, message: str) -> NoReturn:
        raise DiagError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="diag", description="Why is my GPU inference program slow?")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("profile", help="record a run of CMD and diagnose it",
                       usage="diag profile [--out RUN] [--duration S] [options] -- CMD [ARGS...]")
    p.add_argument("--out", "-o", metavar="RUN", help="run directory to create (default: diag-runs/<time>-<name>)")
    _add_profile_options(p)
    p.add_argument("--slo", action="append", default=[], metavar="'p99<200ms'",
                   help="with --load: objective the load must meet (pNN|max|mean<TIME, errors<PCT; repeatable)")
    p.add_argument("--json", metavar="FILE", dest="json_file",
                   help="also write the diagnosis as JSON to FILE (stdout stays the target's)")
    p.add_argument("--html", nargs="?", const="", default=None, metavar="FILE", help="also write an HTML report")
    p.add_argument("--tui", action="store_true", help="open the TUI when the run ends")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing but the target's own output")
    p.epilog = "diag's own output goes to stderr: stdout is the target's alone."
    _add_analysis_args(p)

    a = sub.add_parser("analyze", help=f"diagnose a recorded run (or a trace: {formats_text()})")
    a.add_argument("run", metavar="RUN")
    a.add_argument("--json", action="store_true", help="print only the diagnosis as JSON")
    _add_analysis_args(a)

    t = sub.add_parser("tui", help="explore a run interactively")
    t.add_argument("run", metavar="RUN")
    _add_analysis_args(t)

    r = sub.add_parser("report", help="write a self-contained HTML report")
    r.add_argument("run", metavar="RUN")
    r.add_argument("-o", "--output", metavar="FILE", help="output file (replaced if it exists)")
    r.add_argument("--cdn", action="store_true", help="load plotly.js from a CDN instead of inlining it")
    _add_analysis_args(r)

    d = sub.add_parser("demo", help="profile a bundled sample workload end to end")
    d.add_argument("--out", "-o", metavar="RUN", help="run directory to create")
    d.add_argument("--seconds", type=float, default=8.0, help="how long the sample workload runs")

    from diag.load.spec import add_load_arguments

    lo = sub.add_parser("load", help="drive HTTP load at URL: latency percentiles, errors, SLOs, --sweep")
    add_load_arguments(lo)
    lo.add_argument("--out", "-o", metavar="RUN", help="run directory to create (default: diag-runs/<time>-load-<host>)")
    lo.add_argument("--json", action="store_true", help="print only the result as one JSON object (diag.load/1)")
    from diag.compare_command import add_compare_arguments

    add_compare_arguments(sub.add_parser("compare", help="before/after: what changed, beyond noise; CI gate"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    opts_part, cmd = _split_command(args_in)
    parser = build_parser()
    try:
        args, rest = parser.parse_known_args(opts_part)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        if args.command == "profile":
            cmd = cmd or rest
            if rest and cmd is not rest:
                raise DiagError(f"unexpected arguments before '--': {' '.join(rest)}")
            return cmd_profile(args, cmd)
        if args.command == "compare":  # its own parsing: `A1 A2 -- B1 B2` uses the `--`
            from diag.compare_command import run_compare

            return run_compare(args_in[args_in.index("compare") + 1:])
        if rest:
            raise DiagError(f"unrecognized arguments: {' '.join(rest)}")
        if args.command == "load":
            return cmd_load(args, args_in[args_in.index("load") + 1:])
        return {"analyze": cmd_analyze, "tui": cmd_tui, "report": cmd_report, "demo": cmd_demo}[args.command](args)
    except DiagError as exc:
        print(f"diag: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `diag analyze RUN --json | head`: the reader left, nothing is wrong
        _silence_stdout()
        return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's exit flush does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _load(path: str, rule_dirs: Sequence[str]):  # noqa: ANN202 - (Run, Diagnosis)
    from diag.engine import diagnose
    from diag.store.importers import open_any

    run = open_any(path)
    return run, diagnose(run, rule_dirs=tuple(rule_dirs))


def _print_diagnosis(run, diagnosis, as_json: bool, stderr: bool = False) -> None:  # noqa: ANN001
    """The diagnosis on stdout (`diag analyze`), or on stderr (`diag profile`: stdout is the target's)."""
    if as_json:
        from diag.views.json_view import to_json_text

        print(to_json_text(diagnosis))
        return
    from rich.console import Console

    from diag.views.console import print_diagnosis

    print_diagnosis(diagnosis, run, Console(highlight=False, stderr=stderr))


def cmd_profile(args: argparse.Namespace, cmd: list[str]) -> int:
    from diag.collect.options import OPTIONS
    from diag.collect.profile import ProfileOptions, record

    flags = {o.name: getattr(args, o.name) for o in OPTIONS if o.flag is not None}
    opts = ProfileOptions(out=args.out, extra=dict(args.settings), **flags)
    for path in (args.html, args.json_file):
        if path:
            _check_output(path)
    load = _profiled_load(args, opts)
    rec = record(cmd, opts, load)
    code = _finish(args, rec)
    if load is not None:
        code = _load_exit_code(load, rec, code)
    if rec.reraise:  # the target died of a signal diag had no part in: a parent sees diag die of it too
        from diag.collect.launcher import end_like_target

        return end_like_target(rec.reraise)
    return code


def _profiled_load(args: argparse.Namespace, opts):  # noqa: ANN001, ANN202 - ProfiledLoad | None
    """`--load 'URL ...'`: the load to drive at the server, its words checked before the server starts."""
    if not opts.load:
        if args.slo:
            raise DiagError("--slo needs --load 'URL ...' (or use diag load URL --slo ...)")
        return None
    import shlex

    from diag.load.profiled import ProfiledLoad
    from diag.load.spec import parse_load_args

    words = shlex.split(opts.load) + [w for s in args.slo for w in ("--slo", s)]
    quiet = args.quiet
    return ProfiledLoad(parse_load_args(words), opts.load_wait_s,
                        say=None if quiet else (lambda text: print(f"diag: {text}", file=sys.stderr)))


def _load_exit_code(load, rec, code: int) -> int:  # noqa: ANN001
    """With --load, diag stops the server itself: the load's verdict (1: never answered, an SLO broke)
    then says how the run went, not the stopped server's code; a server that ended on its own keeps its own."""
    if load.error:
        print(f"diag: {load.error}", file=sys.stderr)
    if rec.manifest.get("stopped_by_duration"):
        return load.exit_code
    return code or load.exit_code


def _finish(args: argparse.Namespace, rec) -> int:  # noqa: ANN001
    """Show what the run found. The target has run: diag's own trouble never changes its exit code."""
    try:
        _after_profile(args, rec)
    except DiagError as exc:
        print(f"diag: {exc.message} ({_where(rec.run_dir)})", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - a diag bug must not hide the target's exit code
        print(f"diag: analysis failed ({exc.__class__.__name__}: {exc}); {_where(rec.run_dir)}", file=sys.stderr)
    return rec.exit_code


def _where(run_dir: str) -> str:
    """Where the run is: said only if it is still there (the target may have deleted it)."""
    if os.path.isfile(os.path.join(run_dir, "run.json")):
        return f"run kept in {run_dir}"
    return f"the run directory {run_dir} is gone"


def _after_profile(args: argparse.Namespace, rec) -> None:  # noqa: ANN001
    """Everything on stderr (stdout is the target's); JSON only into --json FILE."""
    if args.quiet and not (args.html is not None or args.tui or args.json_file):
        return
    if not args.quiet:
        from diag.views.console import print_recording

        print_recording(rec.manifest, rec.run_dir)
    run, diagnosis = _load(rec.run_dir, args.rules)
    if not args.quiet:
        _print_diagnosis(run, diagnosis, as_json=False, stderr=True)
    if args.json_file:
        from diag.report.output import write_text_atomic
        from diag.views.json_view import to_json_text

        write_text_atomic(os.path.abspath(args.json_file), to_json_text(diagnosis) + "\n", what="diagnosis")
    if args.html is not None:
        from diag.report import write_report

        out = write_report(run, diagnosis, args.html or None)
        if not args.quiet:
            print(f"report: {out}", file=sys.stderr)
    if args.tui:
        from diag.tui import run_tui

        run_tui(rec.run_dir, diagnosis)


def _check_output(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise DiagError(f"{path}: cannot write the report there")


def cmd_analyze(args: argparse.Namespace) -> int:
    run, diagnosis = _load(args.run, args.rules)
    _print_diagnosis(run, diagnosis, args.json)
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    from diag.tui import run_tui

    return run_tui(args.run, rule_dirs=tuple(args.rules))


def cmd_report(args: argparse.Namespace) -> int:
    from diag.report import write_report

    run, diagnosis = _load(args.run, args.rules)
    out = write_report(run, diagnosis, args.output, cdn=args.cdn)
    print(out)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Profile the bundled CNN pipeline for a few seconds, then print the diagnosis and write the report."""
    from diag.collect.profile import ProfileOptions, record
    from diag.demo import demo_command

    rec = record(demo_command(args.seconds), ProfileOptions(out=args.out))
    shown = argparse.Namespace(json_file=None, quiet=False, tui=False, rules=[],
                               html=os.path.join(rec.run_dir, "report.html"))
    return _finish(shown, rec)


def cmd_load(args: argparse.Namespace, argv: list[str]) -> int:
    """Drive load at URL (diag/load/); exit 0 when every SLO held, 1 when one broke or nothing answered."""
    from diag.load.command import run_command

    return run_command(args, argv)


if __name__ == "__main__":
    sys.exit(main())

