"""Run a load (or a sweep) and keep it as a run directory that report, tui and compare open.

`run_load(spec, out)` is the in-process entry point (`diag profile --load` calls it,
or runs `diag load ... --json` as a subprocess and reads the one JSON object).
The run directory holds run.json (settings, redacted; the result under "load"),
and the tables `load_requests` (one row per request) and `load_sweep` (one row
per sweep step), written as JSON lines while the load runs, then as Parquet.
"""

from __future__ import annotations

import asyncio
import gc
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diag.collect.manifest import host_info, versions
from diag.collect.profile import claim_run_dir, prepare_run_dir
from diag.collect.redact import redact_argv
from diag.load import sweep as sweeps
from diag.load.client import LoadClient, Progress, run_loop
from diag.load.slo import check_all
from diag.load.spec import LoadSpec
from diag.load.stats import summarise
from diag.store.jsonl import JsonlWriter
from diag.store.manifest import SCHEMA, write_manifest

RESULT_SCHEMA = "diag.load/1"
# Exit codes of `diag load`: SLO broken or no request answered; stopped by Ctrl-C.
EXIT_FAILED, EXIT_INTERRUPTED = 1, 130


@dataclass
class LoadResult:
    run_dir: str
    result: dict[str, Any]  # the diag.load/1 object

    @property
    def exit_code(self) -> int:
        return int(self.result["exit_code"])


def default_out(spec: LoadSpec) -> str:
    from urllib.parse import urlsplit

    host = "".join(c if c.isalnum() else "_" for c in (urlsplit(spec.url).hostname or "url"))[:30]
    return os.path.join("diag-runs", f"{time.strftime('%Y%m%d-%H%M%S')}-load-{host}")


def run_load(spec: LoadSpec, out: str | None = None,
             on_tick: Callable[[Progress], None] | None = None) -> LoadResult:
    """Drive the load `spec` describes, store it in a new run directory, return the result.

    Failures of the server (refused, timeouts, 5xx, a crash mid-load) are counted, not raised;
    Ctrl-C ends the load early and keeps what was measured. `on_tick(progress)` is
    called about 4 times a second while the load runs (the progress line).
    """
    run_dir = prepare_run_dir(out or default_out(spec), unique=out is None)
    manifest: dict[str, Any] = {
        "schema": SCHEMA, "run_id": secrets.token_hex(8), "kind": "load", "cwd": os.getcwd(),
        "command": ["diag", "load", *redact_argv(spec.argv or [spec.url])],
        "start_ns": time.time_ns(), "end_ns": None, "duration_s": None, "exit_code": None, "partial": True,
        "host": host_info(), "gpu": {}, "versions": versions(),
        "collectors": {"load": {"status": "running"}}, "options": {"load": spec.public()}}
    claim_run_dir(run_dir, out or run_dir, manifest)
    requests = JsonlWriter(run_dir, "load_requests", flush_rows=1024)
    rows: list[dict[str, Any]] = []
    measured: list[tuple[int, float]] = []  # (step, measured seconds) of each step run

    def on_row(row: dict[str, Any]) -> None:
        rows.append(row)
        requests.write(row)

    steps: list[dict[str, Any]] = []
    client_box: list[LoadClient] = []
    interrupted = False
    # The objects that exist before the load (imports, a host process's whole heap) are left out of
    # the collector's scans meanwhile: a full collection of them stopped the sender for 40 ms in a
    # fresh process and ~390 ms inside a test runner, late sends the load would have counted.
    gc.freeze()
    try:
        run_loop(_drive(spec, on_row, steps, measured, client_box, on_tick))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        requests.close()
        gc.unfreeze()
    stopped = client_box[0].progress.stopped if client_box else ""
    result = _result(spec, run_dir, rows, steps, measured, stopped, interrupted)
    _store(run_dir, manifest, steps, result)
    return LoadResult(run_dir, result)


async def _drive(spec: LoadSpec, on_row: Callable[[dict[str, Any]], None], steps: list[dict[str, Any]],
                 measured: list[tuple[int, float]], client_box: list[LoadClient],
                 on_tick: Callable[[Progress], None] | None) -> None:
    async with LoadClient(spec, on_row) as client:
        client_box.append(client)
        ticker = asyncio.create_task(_tick(client, on_tick)) if on_tick else None
        try:
            if spec.sweep:
                await _sweep(client, spec, steps, measured)
            else:
                await _timed_step(client, spec, spec.concurrency or spec.rate or 1.0, 0, spec.warmup, measured)
        finally:
            if ticker:
                ticker.cancel()


async def _tick(client: LoadClient, on_tick: Callable[[Progress], None]) -> None:
    while True:
        on_tick(client.progress)
        await asyncio.sleep(0.25)


async def _timed_step(client: LoadClient, spec: LoadSpec, level: float, step: int, warmup: float,
                      measured: list[tuple[int, float]]) -> None:
    t0 = time.monotonic()
    client.progress.label = f"{level:g} in flight" if spec.concurrency else f"{level:.4g}/s"
    if spec.sweep:
        client.progress.label = f"step {step + 1}: {client.progress.label}"
    measured.append((step, spec.duration))
    try:
        if spec.concurrency:
            await client.step(concurrency=int(level), seconds=spec.duration, warmup=warmup, step=step)
        else:
            await client.step(rate=level, seconds=spec.duration, warmup=warmup, step=step)
    finally:
        # a step cut short (server gone, Ctrl-C) measured only the time it ran past its warm-up
        ran = time.monotonic() - t0 - warmup
        if client.progress.stopped or ran < spec.duration:
            measured[-1] = (step, max(min(ran, spec.duration), 1e-3))


async def _sweep(client: LoadClient, spec: LoadSpec, steps: list[dict[str, Any]],
                 measured: list[tuple[int, float]]) -> None:
    whole = spec.mode == "closed"
    rows: list[dict[str, Any]] = []
    real_on_row = client.on_row

    def keep(row: dict[str, Any]) -> None:
        rows.append(row)
        real_on_row(row)

    client.on_row = keep

    async def run(level: float) -> dict[str, Any]:
        n = len(steps)
        rows.clear()
        start_ns = time.time_ns()
        await _timed_step(client, spec, level, n, spec.warmup, measured)
        stats = summarise(rows, measured[-1][1])
        checks = check_all(list(spec.slos), stats)
        s = {"ts_ns": start_ns, "step": n, "level": level, **{k: v for k, v in stats.items() if k != "errors_by_kind"},
             **{f"errors_{k}": v for k, v in stats["errors_by_kind"].items()},
             "held": all(c["held"] for c in checks), "stopped": client.progress.stopped}
        steps.append(s)
        return s

    breaks = 0
    start = float(spec.concurrency or spec.rate or 10.0)
    for level in sweeps.climb_levels(start, spec.sweep_factor, spec.sweep_max_steps, whole):
        s = await run(level)
        breaks += not s["held"]
        if breaks >= 2 or sweeps.exploded(s, s["stopped"]):
            break
    for _ in range(spec.sweep_refine):
        held, broke = sweeps.bounds(steps)
        if held is None or broke is None or client.progress.stopped:
            break
        mid = sweeps.bisect_level(held, broke, whole)
        if mid is None:
            break
        await run(mid)


def _result(spec: LoadSpec, run_dir: str, rows: list[dict[str, Any]], steps: list[dict[str, Any]],
            measured: list[tuple[int, float]], stopped: str, interrupted: bool) -> dict[str, Any]:
    seconds = sum(s for _, s in measured) or spec.duration
    stats = summarise(rows, seconds)
    sweep = None
    if spec.sweep:
        sweep = sweeps.summary(steps, "concurrency" if spec.mode == "closed" else "rate")
        best = next((s for s in steps if s["level"] == sweep["best_level"]), None)
        # the SLO verdict of a sweep is that of its best step (none held: the lowest step's)
        shown = best or (steps[0] if steps else None)
        checks = check_all(list(spec.slos), shown or {})
    else:
        checks = check_all(list(spec.slos), stats)
    held = all(c["held"] for c in checks) if checks else None
    failed = held is False or stats["ok"] == 0 or bool(stopped)
    return {"schema": RESULT_SCHEMA, "run_dir": run_dir, "settings": spec.public(), "stats": stats,
            "slos": checks, "slo_held": held, "sweep": sweep, "stopped": stopped, "interrupted": interrupted,
            "problem": problem(stats, stopped, spec),
            "exit_code": EXIT_INTERRUPTED if interrupted else EXIT_FAILED if failed else 0}


def problem(stats: dict[str, Any], stopped: str, spec: LoadSpec) -> str:
    """One line on what went wrong with the server, "" if nothing did."""
    from diag.load.spec import redact_value

    kinds = {k: v for k, v in stats["errors_by_kind"].items() if v}
    what = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
    if stopped:
        return f"stopped early: {stopped} at {redact_value(spec.url)}; figures so far kept"
    if stats["requests"] and stats["ok"] == 0:
        return f"no request succeeded ({what}) at {redact_value(spec.url)}"
    if stats["error_rate"] and stats["error_rate"] >= 0.05:
        return f"{stats['error_rate'] * 100:.0f}% of requests failed ({what})"
    return ""


def _store(run_dir: str, manifest: dict[str, Any], steps: list[dict[str, Any]], result: dict[str, Any]) -> None:
    """The sweep table and the final run.json; Parquet tables last (the raw rows stay readable if that fails)."""
    if steps:
        w = JsonlWriter(run_dir, "load_sweep")
        for s in steps:
            w.write(s)
        w.close()
    manifest.update(end_ns=time.time_ns(), exit_code=result["exit_code"], load=result,
                    collectors={"load": {"status": "ok" if not result["problem"] else "degraded",
                                         **({"reason": result["problem"]} if result["problem"] else {})}})
    manifest["duration_s"] = (manifest["end_ns"] - manifest["start_ns"]) / 1e9
    write_manifest(run_dir, manifest)
    try:
        from diag.store.run import seal

        seal(run_dir)
    except Exception as exc:  # noqa: BLE001 - the raw rows are still there
        result["problem"] = result["problem"] or f"could not write Parquet tables ({exc}); raw rows kept"
        return
    manifest["partial"] = False
    write_manifest(run_dir, manifest)
