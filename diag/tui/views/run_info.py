"""Run: the manifest — command, host, GPU, versions, env, collector status."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from diag.analysis.units import format_value
from diag.tui.source import Source
from diag.tui.views.base import View

STATUS_STYLE = {"ok": "green", "off": "dim", "unavailable": "yellow", "failed": "bold red"}


def _kv(title: str, rows: list[tuple[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None,
                  padding=(0, 1), expand=True)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    for k, v in rows:
        table.add_row(k, v if isinstance(v, Text) else Text(str(v)))
    if not rows:
        table.add_row("–", "")
    return table


def manifest_tables(m: dict[str, Any]) -> list[Table]:
    """The manifest as titled key/value tables, in reading order."""
    host = m.get("host") or {}
    gpu = m.get("gpu") or {}
    run = [("command", " ".join(str(c) for c in m.get("command") or [])), ("cwd", m.get("cwd", "")),
           ("run id", m.get("run_id", "")), ("duration", format_value(m.get("duration_s"), "s")),
           ("exit code", m.get("exit_code")), ("signal", m.get("signal") or "–"),
           ("partial", "yes — the recording was cut short" if m.get("partial") else "no")]
    hosts = [("hostname", host.get("hostname", "")), ("cpu", host.get("cpu_model", "")),
             ("cores", f"{host.get('cores_physical', '?')} physical, {host.get('cores_logical', '?')} logical"),
             ("ram", format_value(host.get("ram_bytes"), "bytes")), ("os", host.get("os", ""))]
    gpus: list[tuple[str, Any]] = []
    for dev in gpu.get("devices") or []:
        gpm = "GPM" if dev.get("gpm") else "no GPM"
        gpus.append((f"gpu {dev.get('index', '?')}", f"{dev.get('name', '?')}, {format_value(dev.get('memory_bytes'), 'bytes')}, {gpm}"))
    if gpu.get("driver"):
        gpus.append(("driver", f"{gpu['driver']} (CUDA {gpu.get('cuda_driver', '?')})"))
    if not gpus:
        gpus.append(("none", gpu.get("reason", "no GPU seen")))
    collectors = []
    for name, c in (m.get("collectors") or {}).items():
        status = c.get("status", "?")
        line = Text(status, style=STATUS_STYLE.get(status, ""))
        if c.get("reason"):
            line.append(f" — {c['reason']}")
        collectors.append((name, line))
    return [_kv("Run", run), _kv("Collectors", collectors), _kv("Host", hosts), _kv("GPU", gpus),
            _kv("Versions", sorted((m.get("versions") or {}).items())),
            _kv("Environment", sorted((m.get("env") or {}).items())),
            _kv("Options", sorted((m.get("options") or {}).items()))]


class RunView(View):
    TITLE = "Run"
    HELP = "The run's manifest: command, host, GPU, library versions, environment, each collector's status."

    def load(self, source: Source) -> dict[str, Any]:
        return source.manifest

    def show(self, data: dict[str, Any]) -> None:
        parts: list[Any] = []
        for t in manifest_tables(data):
            parts += [t, Text("")]
        self.mount(VerticalScroll(Static(Group(*parts)), id="run-body"))

    def focus_main(self) -> None:
        for body in self.query("#run-body"):
            body.focus()
