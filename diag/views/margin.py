"""How decisive a verdict is: the runner-up and the margin, in one line every view shows."""

from __future__ import annotations

from diag.engine.diagnosis import Diagnosis


def margin_text(d: Diagnosis) -> str:
    """'runner-up io_bound 0.48, margin 0.15' (plus the evidence that broke a tie); '' without a verdict."""
    if not d.primary or d.margin is None:
        return ""
    if d.runner_up is None:
        return f"no other label has evidence, margin {d.margin:.2f}"
    text = f"runner-up {d.runner_up} {float(d.scores.get(d.runner_up, 0.0)):.2f}, margin {d.margin:.2f}"
    if d.tie_break:
        text += f"; close call decided by evidence: {d.tie_break}"
    return text
