"""The verdict from label scores: the winner, the runner-up, the margin between them, and ties.

Where the two best scores are closer than the policy's `ties.close_margin`,
the scores do not tell the labels apart: the first tie-breaker of the policy
for that pair whose evidence holds on the run's metrics decides (thread on or
off the CPU, GPU busy, share of the run spent starting up). Scores are never
changed; the Diagnosis names the breaker that decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from diag.engine.diagnosis import LABELS
from diag.engine.policy import Policy


@dataclass(frozen=True)
class Verdict:
    primary: str | None
    runner_up: str | None
    margin: float | None  # primary's score minus runner-up's (None without a primary)
    tie_break: str = ""  # "<winner> over <other>: <why>" when a tie-breaker decided


def decide(scores: dict[str, float], metrics: dict[str, float | None], policy: Policy) -> Verdict:
    """The primary label under the policy, its runner-up and margin."""
    ranked = sorted(LABELS, key=lambda lb: (-scores.get(lb, 0.0), policy.rank(lb)))
    best, second = ranked[0], ranked[1]
    if scores.get(best, 0.0) < policy.primary_min:
        return Verdict(None, None, None)
    why = ""
    close = scores[best] - scores.get(second, 0.0) < policy.close_margin and scores.get(second, 0.0) > 0
    if close:
        t = policy.breaker_for(best, second, metrics)
        if t is not None:
            if t.prefer == second:
                best, second = second, best
            why = f"{best} over {second}: {t.why}"
    runner = second if scores.get(second, 0.0) > 0 else None  # no label but the winner has evidence
    return Verdict(best, runner, round(scores[best] - scores.get(second, 0.0), 3), why)
