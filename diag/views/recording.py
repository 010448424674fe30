"""Console lines that say what a run recorded and what could not be recorded."""

from __future__ import annotations

import os
import shlex
from typing import Any

from rich.console import Console
from rich.markup import escape

_STATUS_STYLE = {"ok": "green", "off": "dim", "unavailable": "yellow", "failed": "red"}


def _count_rows(run_dir: str) -> dict[str, int]:
    import pyarrow.parquet as pq

    counts = {}
    for name in sorted(os.listdir(run_dir)):
        if name.endswith(".parquet"):
            try:
                counts[name[:-8]] = pq.ParquetFile(os.path.join(run_dir, name)).metadata.num_rows
            except Exception:  # noqa: BLE001 - a count is only informative
                continue
    return counts


def print_recording(manifest: dict[str, Any], run_dir: str, console: Console | None = None) -> None:
    """Print the run directory, the collectors' status (with reasons) and row counts."""
    console = console or Console(stderr=True, highlight=False)
    code = manifest.get("exit_code")
    command = shlex.join(manifest.get("command", []))
    if len(command) > 100:
        command = command[:99] + "…"
    console.print(f"[bold]diag[/] recorded {manifest.get('duration_s') or 0:.1f} s of [bold]{escape(command)}[/]"
                  f" (exit code {code}) in [cyan]{escape(run_dir)}[/]")
    for name, st in sorted(manifest.get("collectors", {}).items()):
        status = st.get("status", "?")
        reason = f" — {st['reason']}" if st.get("reason") else ""
        console.print(f"  {name:<8} [{_STATUS_STYLE.get(status, 'white')}]{status}[/]{escape(reason)}")
    counts = {k: v for k, v in _count_rows(run_dir).items() if v}
    if counts:
        console.print("  rows: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if manifest.get("partial") and not manifest.get("loss"):  # a lossy run says why in its hooks line
        console.print("  [yellow]partial run: tables are read from raw/ JSON lines[/]")
