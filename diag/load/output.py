"""How a load result reads: the console summary and the progress line (rich), every number
through diag.analysis.units.format_value."""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from diag.analysis.latency import PERCENTILES
from diag.analysis.units import format_value
from diag.load.client import Progress

LATENCY_KEYS = [*(f"p{q}_ms" for q in PERCENTILES), "max_ms"]


def to_json_text(result: dict[str, Any]) -> str:
    """The one JSON object `diag load --json` prints (schema diag.load/1)."""
    return json.dumps(result, default=str, allow_nan=False)


def progress_text(p: Progress) -> str:
    """`step 2: 75/s  3.1/5.5 s  sent 230  errors 0  in flight 4  p99 (recent) 52 ms`."""
    elapsed = min(time.monotonic() - p.started, p.seconds) if p.started else 0.0
    recent = sorted(p.last_ms)
    p99 = recent[int(0.99 * (len(recent) - 1))] if recent else None
    return (f"{p.label}  {elapsed:.1f}/{p.seconds:.1f} s  sent {p.sent:,}  errors {p.errors:,}  "
            f"in flight {p.in_flight:,}  p99 (recent) {format_value(p99, 'ms')}")


def print_result(result: dict[str, Any], console: Console) -> None:
    """Throughput, errors by kind, latency percentiles, SLOs and the sweep, as a few tables."""
    st, settings = result["stats"], result["settings"]
    how = (f"{settings['concurrency']} in flight (closed loop)" if settings["mode"] == "closed"
           else f"{format_value(settings['rate'], 'per_s')} offered ({settings['arrivals']}, open loop)")
    if not result["sweep"]:
        console.print(f"[bold]load[/] {settings['method']} {settings['url']}: {how}, "
                      f"{format_value(st['seconds'], 's')} measured")
        console.print(f"  throughput {format_value(st['throughput_per_s'], 'per_s')} "
                      f"({format_value(st['ok'], 'count')} ok of {format_value(st['requests'], 'count')}), "
                      f"errors {format_value(st['error_rate'], 'ratio')}")
        errs = {k: v for k, v in st["errors_by_kind"].items() if v}
        if errs:
            console.print("  errors: " + ", ".join(f"{k.replace('_', ' ')} {format_value(v, 'count')}"
                                                     for k, v in errs.items()))
        t = Table(box=None, pad_edge=False)
        for k in LATENCY_KEYS:
            t.add_column(k.removesuffix("_ms"), justify="right")
        t.add_column("send lag p99", justify="right")
        t.add_row(*(format_value(st[k], "ms") for k in LATENCY_KEYS), format_value(st["send_lag_p99_ms"], "ms"))
        console.print(t)
    else:
        _print_sweep(result["sweep"], console)
    for c in result["slos"]:
        unit = "ratio" if c["key"] == "error_rate" else "ms"
        mark = "[green]held[/]" if c["held"] else "[red]broken[/]"
        console.print(f"  SLO {c['slo']}: {mark} ({format_value(c['value'], unit)})")
    console.print(f"  run kept in {result['run_dir']}")


def _print_sweep(sw: dict[str, Any], console: Console) -> None:
    unit = "per_s" if sw["unit"] == "rate" else "count"
    t = Table(title="sweep", box=None, pad_edge=False)
    for name in (sw["unit"], "throughput", "errors", *(k.removesuffix("_ms") for k in LATENCY_KEYS), "SLO"):
        t.add_column(name, justify="right")
    for s in sorted(sw["steps"], key=lambda s: s["level"]):
        t.add_row(format_value(s["level"], unit), format_value(s["throughput_per_s"], "per_s"),
                  format_value(s["error_rate"], "ratio"), *(format_value(s[k], "ms") for k in LATENCY_KEYS),
                  "held" if s["held"] else "broken")
    console.print(t)
    best = sw["best_level"]
    console.print(f"  highest {sw['unit']} meeting the SLOs: [bold]{format_value(best, unit)}[/]"
                  + (f" ({format_value(sw['best_throughput_per_s'], 'per_s')} served)" if best is not None else
                     " (none: the lowest step already broke them)"))
    console.print(f"  knee of the p99 curve: {format_value(sw['knee_level'], unit)}")
