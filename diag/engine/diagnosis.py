"""The Diagnosis: what every view shows. Plain dataclasses, no logic beyond JSON.

JSON shape is a contract (../DESIGN.md, schema diag.diagnosis/1): fields may be
added, never renamed or removed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from diag.analysis.phases import Phase  # defined below the engine; re-exported for the views

SCHEMA = "diag.diagnosis/1"

LABELS: tuple[str, ...] = (
    "compute_bound",
    "memory_bound",
    "transfer_bound",
    "launch_bound",
    "cpu_bound",
    "io_bound",
    "cold_start",
    "queueing",
    "communication_bound",
)

# What each label means (DESIGN.md, Labels): the words every view shows.
LABEL_MEANING: dict[str, str] = {
    "compute_bound": "math units saturated by the model (GEMM/conv); on CPU, time in the model's own operators",
    "memory_bound": "device memory bandwidth is the limit (low arithmetic intensity kernels dominate)",
    "transfer_bound": "host-device copies dominate (e.g. pageable H2D each step)",
    "launch_bound": "many tiny kernels; the GPU idles between launches while the CPU launches",
    "cpu_bound": "host-side work outside the model (pre/post-processing, Python) starves the device",
    "io_bound": "the process waits on disk or network for its inputs",
    "cold_start": "one-time startup (load, compile, first-call warm-up) dominates",
    "queueing": "requests wait (in a queue, a backlog or before the handler runs) longer than they are served",
    "communication_bound": ("collective or peer communication (NCCL, RCCL, gloo…) not hidden behind compute "
                            "holds the step"),
}

SEVERITIES: tuple[str, ...] = ("info", "low", "medium", "high")


def severity_rank(severity: str) -> int:
    """0 (info) to 3 (high): the one severity order the engine sorts findings by and views read."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else 0


@dataclass
class Evidence:
    metric: str
    value: float | None
    unit: str
    threshold: str = ""  # the condition it was held against, e.g. "> 0.3"


@dataclass
class Recommendation:
    text: str
    code: str = ""
    expected_gain: str = ""  # an upper bound from the measured shares
    link: str = ""  # docs/ page or anchor
    # the rule's `gain` as a number: at most this factor (None when the rule gives none), on
    # `gain_on` ("throughput", "request_latency" or "wall_time"); `gain_point` is the rule's point
    # prediction (`predict`) where the data allows one. `diag compare` holds the realised gain to them.
    gain_max: float | None = None
    gain_point: float | None = None
    gain_on: str = ""


@dataclass
class Finding:
    rule: str
    label: str | None  # None for notes that back no label (e.g. too little evidence)
    severity: str
    title: str
    score: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)
    recommendations: list[Recommendation] = field(default_factory=list)


@dataclass
class Diagnosis:
    run: dict[str, Any]
    primary: str | None
    scores: dict[str, float]
    phases: list[Phase]
    findings: list[Finding]
    metrics: dict[str, float | None]
    units: dict[str, str] = field(default_factory=dict)
    # labels the run gave no evidence to judge, and why (their score stays 0.0 in [0, 1]): views
    # show "n/a (reason)" instead of a score
    not_judged: dict[str, str] = field(default_factory=dict)
    # names rule titles use beside metrics (hot frames, stages): diag.analysis.serving.NAMES
    names: dict[str, str] = field(default_factory=dict)
    # request time by measured part and by stage, threads by role, members (workers) judged on their
    # own: diag.analysis.serving.summary; {} when the program serves nothing
    serving: dict[str, Any] = field(default_factory=dict)
    # the load driven at it (diag load, diag profile --load): diag.analysis.load.summary; {} without one
    load: dict[str, Any] = field(default_factory=dict)
    # the best label after the primary, primary's score minus its score, and the policy's tie-breaker
    # that decided when the two were close (diag.engine.verdict)
    runner_up: str | None = None
    margin: float | None = None
    tie_break: str = ""
    # ranks of a multi-rank job, each judged on its own (diag.analysis.members.Member as a dict), and the
    # job's figures over them (diag.analysis.ranks.rank_spread: slowest rank, imbalance, largest collective
    # share); [] and {} for a single process
    members: list[dict[str, Any]] = field(default_factory=list)
    ranks: dict[str, Any] = field(default_factory=dict)

    def no_verdict_reason(self) -> str:
        """Why `primary` is None: the engine's own `verdict.*` finding, in its words."""
        return next((f.title for f in self.findings if f.rule.startswith("verdict.")),
                    "the run holds too little evidence to classify it")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "run": self.run,
            "primary": self.primary,
            "scores": {label: round(float(self.scores.get(label, 0.0)), 3) for label in LABELS},
            "phases": [asdict(p) for p in self.phases],
            "findings": [asdict(f) for f in self.findings],
            "metrics": {k: _json_number(v) for k, v in self.metrics.items()},
            "units": dict(self.units),
            "not_judged": dict(self.not_judged),
            "names": dict(self.names),
            "serving": self.serving,
            "load": self.load,
            "runner_up": self.runner_up,
            "margin": self.margin,
            "tie_break": self.tie_break,
            "members": [_member_json(m) for m in self.members],
            "ranks": dict(self.ranks),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnosis:
        return cls(
            run=data["run"],
            primary=data["primary"],
            scores=data["scores"],
            phases=[Phase(**p) for p in data["phases"]],
            findings=[
                Finding(
                    **{k: v for k, v in f.items() if k not in ("evidence", "recommendations")},
                    evidence=[Evidence(**e) for e in f.get("evidence", [])],
                    recommendations=[Recommendation(**r) for r in f.get("recommendations", [])],
                )
                for f in data["findings"]
            ],
            metrics=data["metrics"],
            units=data.get("units", {}),
            not_judged=data.get("not_judged") or {},
            names=data.get("names") or {},
            serving=data.get("serving") or {},
            load=data.get("load") or {},
            runner_up=data.get("runner_up"),
            margin=data.get("margin"),
            tie_break=data.get("tie_break") or "",
            members=data.get("members") or [],
            ranks=data.get("ranks") or {},
        )


def _member_json(m: dict[str, Any]) -> dict[str, Any]:
    """A member with its numbers JSON-safe (NaN and inf become null), its metrics too."""
    out = {k: _json_number(v) if isinstance(v, float) else v for k, v in m.items()}
    if isinstance(m.get("metrics"), dict):
        out["metrics"] = {k: _json_number(v) for k, v in m["metrics"].items()}
    return out


def _json_number(v: float | None) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if f != f or f in (float("inf"), float("-inf")):
        return None
    return round(f, 6)
