"""`diag compare A B`: open both sides, diagnose, compare, show, and gate CI on budgets.

    diag compare A B [--json] [-o compare.html] [--tui] [--fail-if 'EXPR']... [--budgets FILE]
    diag compare A1 A2 A3 -- B1 B2 B3          # several runs of one set-up per side
    diag compare RUNS_BEFORE/ RUNS_AFTER/      # a directory of run directories per side

Exit codes: 0 (no budget broken), 1 (a budget's whole interval lies past it),
2 (bad input: a missing or corrupt run, a bad budget).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from diag.errors import DiagError

EXIT_BROKEN = 1
MAX_RUNS_PER_SIDE = 50


class _Parser(argparse.ArgumentParser):
    """A bad command line is one line (DiagError, exit 2), as everywhere in diag."""

    def error(self, message: str) -> NoReturn:
        raise DiagError(f"compare: {message}")


def add_compare_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `diag compare` (the CLI's subparser; parse_compare reads them)."""
    p.add_argument("runs", nargs="*", metavar="RUN",
                   help="A B, or A1 A2 ... -- B1 B2 ...; a run, an imported trace, a load run, "
                        "or a directory of runs")
    p.add_argument("--json", action="store_true", help="print only the comparison as JSON (diag.compare/1)")
    p.add_argument("-o", "--output", metavar="FILE", help="also write an HTML report of the comparison")
    p.add_argument("--tui", action="store_true", help="explore the comparison in the TUI")
    p.add_argument("--fail-if", action="append", default=[], metavar="EXPR", dest="fail_if",
                   help="exit 1 when the whole interval lies past this budget, e.g. 'request_p99_ms > +10%%'")
    p.add_argument("--budgets", metavar="FILE", help="TOML file of budgets: fail_if = [\"steps_per_s < -5%%\"]")
    p.add_argument("--rules", action="append", default=[], metavar="DIR", help="extra rule files (*.toml)")


def parse_compare(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str], list[str]]:
    """(options, side A paths, side B paths) from the words after `compare`."""
    parser = _Parser(prog="diag compare")
    add_compare_arguments(parser)
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        left, right = parser.parse_intermixed_args(argv[:i]), parser.parse_intermixed_args(argv[i + 1:])
        a, b = left.runs, right.runs
        for key, value in vars(right).items():  # options may follow either side
            if key == "fail_if" or key == "rules":
                getattr(left, key).extend(value)
            elif value not in (None, False) and key != "runs":
                setattr(left, key, value)
        args = left
        if not a or not b:
            raise DiagError("compare: give runs on both sides of '--' (A1 A2 -- B1 B2)")
    else:
        args = parser.parse_intermixed_args(argv)
        if len(args.runs) != 2:
            raise DiagError("compare: give two runs (A B), or several per side: A1 A2 -- B1 B2")
        a, b = [args.runs[0]], [args.runs[1]]
    return args, a, b


def expand(paths: Sequence[str]) -> list[str]:
    """Run paths, with a directory that is no run itself replaced by the runs inside it."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p) and not os.path.lexists(os.path.join(p, "run.json")):
            inner = sorted(os.path.join(p, n) for n in os.listdir(p)
                           if os.path.isfile(os.path.join(p, n, "run.json")))
            if not inner:
                raise DiagError(f"{p}: no runs in it (no run directory with a run.json)")
            out += inner
        else:
            out.append(p)
    if len(out) > MAX_RUNS_PER_SIDE:
        raise DiagError(f"compare: more than {MAX_RUNS_PER_SIDE} runs on one side")
    return out


def open_runs(paths: Sequence[str]) -> list[Any]:
    """Each path opened as `diag analyze` opens it; DiagError (one line) for a missing or unreadable one."""
    from diag.store.importers import open_any

    return [(path, open_any(path)) for path in paths]


def diagnose_side(opened: Sequence[Any], rule_dirs: Sequence[str]) -> list[Any]:
    """Each opened run diagnosed (a load run has nothing to diagnose); a corrupt run is one line, exit 2."""
    from diag.analysis.compare import RunInput, is_load_run
    from diag.engine import diagnose

    out = []
    for path, run in opened:
        try:
            diagnosis = None if is_load_run(run) else diagnose(run, rule_dirs=tuple(rule_dirs)).to_json()
            out.append(RunInput(path, run, diagnosis))
        except DiagError:
            raise
        except Exception as exc:  # noqa: BLE001 - a corrupt run is bad input: one line, exit 2
            raise DiagError(f"{path}: cannot read this run ({exc.__class__.__name__}: "
                            f"{str(exc).splitlines()[0][:160] if str(exc) else 'corrupt'})") from None
    return out


def open_side(paths: Sequence[str], rule_dirs: Sequence[str]) -> list[Any]:
    """The runs of one side, opened and diagnosed."""
    return diagnose_side(open_runs(paths), rule_dirs)


def budgets_of(args: argparse.Namespace) -> list[Any]:
    from diag.engine.gate import load_budgets, parse_budget

    texts = list(args.fail_if) + (load_budgets(args.budgets) if args.budgets else [])
    return [parse_budget(t) for t in texts]


def run_compare(argv: Sequence[str]) -> int:
    """The whole command; DiagError (exit 2) for bad input, 1 when a budget is broken."""
    args, a_paths, b_paths = parse_compare(argv)
    budgets = budgets_of(args)  # bad budgets fail before any run is read
    if args.output:
        from diag.report.output import report_path

        report_path("", args.output)  # DiagError now if the file cannot be written
    from diag.analysis.compare import compare
    from diag.engine.gate import check

    opened_a, opened_b = open_runs(expand(a_paths)), open_runs(expand(b_paths))  # all found before any work
    a, b = diagnose_side(opened_a, args.rules), diagnose_side(opened_b, args.rules)
    try:
        comparison = compare(a, b)
    except Exception as exc:  # noqa: BLE001 - tables a reader let through but analysis cannot use
        raise DiagError(f"compare: cannot compare these runs ({exc.__class__.__name__}: "
                        f"{str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
    gate = check(budgets, comparison)
    if args.json:
        from diag.views.compare import to_json_text

        print(to_json_text(comparison, gate))
    else:
        from rich.console import Console

        from diag.views.compare import print_comparison

        print_comparison(comparison, Console(highlight=False), gate)
    if args.output:
        from diag.report.compare import write_compare_report

        out = write_compare_report(comparison, gate, args.output)
        print(f"report: {out}", file=sys.stderr if args.json else sys.stdout)
    if args.tui:
        from diag.tui.compare import run_compare_tui

        run_compare_tui(comparison, gate)
    broken = [g for g in gate if g["broken"]]
    if broken:
        print("diag compare: budget broken: " + "; ".join(g["budget"] for g in broken), file=sys.stderr)
        return EXIT_BROKEN
    return 0
