"""The diagnosis on the terminal (rich): verdict, label scores, top findings with evidence and fixes.

Built to fit one screen: `build(diagnosis)` returns the renderable (tests
render it to text), `print_diagnosis` prints it.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from diag.analysis.units import format_value
from diag.engine.diagnose import STRONG_SCORE, WEAK_SCORE
from diag.engine.diagnosis import LABELS, Diagnosis, Evidence, Finding
from diag.views import load as load_view
from diag.views import ranks as ranks_view
from diag.views import serving
from diag.views.margin import margin_text
from diag.views.recording import print_recording  # noqa: F401 - the CLI prints both from here

BAR_WIDTH = 20
MAX_FINDINGS = 3
MAX_CODE_LINES = 6
MAX_EVIDENCE = 4
_SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}


def _bar(score: float) -> Text:
    filled = int(round(score * BAR_WIDTH))
    style = "bold green" if score >= STRONG_SCORE else "yellow" if score >= WEAK_SCORE else "dim"
    return Text("█" * filled, style=style) + Text("·" * (BAR_WIDTH - filled), style="dim")


def _verdict(d: Diagnosis) -> Text:
    run = d.run
    where = run.get("gpu") or run.get("device") or ""
    head = Text("diag verdict: ", style="bold")
    if d.primary:
        head += Text(d.primary, style="bold magenta")
        score = d.scores.get(d.primary, 0)
        head += Text(f"  (score {score:.2f}{', weak evidence' if score < WEAK_SCORE else ''})", style="dim")
        if margin_text(d):
            head += Text(f"\n{margin_text(d)}", style="dim")
    else:
        head += Text("none", style="bold yellow") + Text(f"  ({d.no_verdict_reason()})", style="dim")
    cmd = " ".join(str(c) for c in run.get("command") or [])
    if not cmd and isinstance(run.get("imported_from"), dict):  # a trace from another tool
        cmd = f"imported {run['imported_from'].get('format', 'trace')}: {run['imported_from'].get('path', '')}"
    head += Text(f"\n{cmd}  ·  {format_value(run.get('duration_s') or 0, 's')}  ·  {where}", style="dim")
    return head


def _scores(d: Diagnosis) -> Table:
    t = Table.grid(padding=(0, 1))
    t.add_column(justify="right")
    t.add_column()
    t.add_column(justify="right")
    zero = [lb for lb in LABELS if float(d.scores.get(lb, 0.0)) < 0.005]
    for label in sorted(LABELS, key=lambda lb: -d.scores.get(lb, 0.0)):
        s = float(d.scores.get(label, 0.0))
        if label in zero:
            continue
        style = "bold" if label == d.primary else ""
        t.add_row(Text(label, style=style), _bar(s), Text(f"{s:.2f}", style=style or "dim"))
    return t


def _zero_labels(d: Diagnosis) -> Text:
    zero = [lb for lb in LABELS if float(d.scores.get(lb, 0.0)) < 0.005 and lb not in d.not_judged]
    out = Text("0.00: " + ", ".join(zero), style="dim") if zero else Text("")
    for label in LABELS:  # never 0.00 for a label the run could not show: say why
        text = serving.not_judged_text(d, label)
        if text and float(d.scores.get(label, 0.0)) < 0.005:
            out += Text(("\n" if out.plain else "") + f"{label}: {text}", style="dim")
    return out


def _evidence(items: list[Evidence]) -> Text:
    parts = []
    for e in items[:MAX_EVIDENCE]:
        if e.value is None:
            continue
        parts.append(f"{e.metric} = {format_value(e.value, e.unit)}")
    return Text("  evidence: " + ", ".join(parts), style="dim") if parts else Text("")


def _finding(f: Finding, detailed: bool) -> RenderableType:
    parts: list[RenderableType] = []
    sev = Text(f"[{f.severity}] ", style=_SEVERITY_STYLE.get(f.severity, ""))
    parts.append(sev + Text(f.title, style="bold") + Text(f"  {f.rule}", style="dim"))
    ev = _evidence(f.evidence if detailed else f.evidence[:2])
    if ev.plain:
        parts.append(ev)
    if f.recommendations and not detailed:  # a secondary finding: its first fix, one line
        line = Text("  fix: ", style="green") + Text(f.recommendations[0].text)
        line.no_wrap, line.overflow = True, "ellipsis"
        parts.append(line)
        return Group(*parts)
    if f.recommendations:
        r = f.recommendations[0]
        parts.append(Text.from_markup("  [green]fix:[/] " + escape(r.text)))
        if r.code and detailed:
            lines = r.code.splitlines()
            code = "\n".join(lines[:MAX_CODE_LINES]) + ("\n..." if len(lines) > MAX_CODE_LINES else "")
            parts.append(Padding(Syntax(code, "python", theme="ansi_dark", background_color="default", word_wrap=True),
                                 (0, 0, 0, 4)))
        tail = []
        if r.expected_gain:
            tail.append(f"gain: {r.expected_gain}")
        if r.link:
            tail.append(r.link)
        more = len(f.recommendations) - 1
        if more > 0:
            tail.append(f"+{more} more fix{'es' if more > 1 else ''} (diag report / --json)")
        if tail:
            parts.append(Text("  " + "  ·  ".join(tail), style="dim"))
    return Group(*parts)


def build(d: Diagnosis, max_findings: int = MAX_FINDINGS) -> RenderableType:
    """The whole console view of a diagnosis."""
    parts: list[RenderableType] = [_verdict(d), Text(""), _scores(d)]
    zero = _zero_labels(d)
    if zero.plain:
        parts.append(zero)
    serving_lines = serving.lines(d)
    if serving_lines:
        parts.append(Text(""))
        parts += [Text(line, style="dim") for line in serving_lines]
    rank_lines = ranks_view.lines(d)
    if rank_lines:
        parts += [Text(""), *(Text(line, style="dim") for line in rank_lines)]
    if d.load:
        parts += [Text(""), *load_view.renderables(d)]
    shown = d.findings[:max_findings]
    if shown:
        parts.append(Text(""))
    for i, f in enumerate(shown):
        parts.append(_finding(f, detailed=i == 0))
    hidden = len(d.findings) - len(shown)
    if hidden > 0:
        parts.append(Text(f"{hidden} more finding{'s' if hidden > 1 else ''}: diag analyze RUN --json, or diag report RUN",
                          style="dim"))
    return Group(*parts)


def print_diagnosis(d: Diagnosis, run: object = None, console: Console | None = None) -> None:
    """Print the diagnosis to the terminal (stdout unless a console is given).

    `run` (the diag.store.run.Run) is accepted for callers that have it; the
    view needs only the diagnosis.
    """
    (console or Console(highlight=False)).print(build(d))


def render_text(d: Diagnosis, width: int = 100) -> str:
    """The console view as plain text (for tests and logs)."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    with console.capture() as cap:
        console.print(build(d))
    return cap.get()
