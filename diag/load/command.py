"""`diag load` on the command line: settings from arguments, a progress line, the summary or JSON."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from diag.load.output import print_result, progress_text, to_json_text
from diag.load.runner import run_load
from diag.load.spec import spec_from_args


def run_command(args: argparse.Namespace, argv: list[str]) -> int:
    """Run the load the parsed `args` describe; return diag load's exit code.

    The summary (or, with --json, one JSON object) goes to stdout; the progress line
    and the one-line problem (server gone, most requests failed) to stderr.
    """
    spec = spec_from_args(args, _without_out(argv))
    err = Console(stderr=True, highlight=False)
    on_tick = None
    status = None
    if err.is_terminal:
        # a slow refresh: the spinner's thread takes the GIL from the event loop that times requests
        status = err.status("load starting", refresh_per_second=4)
        status.start()

        def on_tick(p) -> None:  # noqa: ANN001 - diag.load.client.Progress
            status.update(progress_text(p))

    try:
        res = run_load(spec, args.out, on_tick=on_tick)
    finally:
        if status is not None:
            status.stop()
    result = res.result
    if args.json:
        print(to_json_text(result))
    else:
        print_result(result, Console(highlight=False))
    if result["interrupted"]:
        print(f"diag: load interrupted; figures so far kept in {res.run_dir}", file=sys.stderr)
    elif result["problem"]:
        print(f"diag: {result['problem']}", file=sys.stderr)
    return res.exit_code


def _without_out(argv: list[str]) -> list[str]:
    """The load's own words (for run.json), without --out/--json which only say where things go."""
    out, skip = [], False
    for w in argv:
        if skip:
            skip = False
            continue
        if w in ("--out", "-o"):
            skip = True
            continue
        if w == "--json" or w.startswith("--out="):
            continue
        out.append(w)
    return out
