"""`diagnose(run)`: metrics -> rules -> a Diagnosis with scores, a primary label and findings."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from diag.analysis import serving
from diag.analysis.context import steady_context
from diag.analysis.members import judge_members
from diag.analysis.metrics import BY_NAME, compute_metrics, unit
from diag.analysis.phases import Phases, compute_phases, imported
from diag.analysis.ranks import judge_ranks, trace_rank_members
from diag.analysis.trace_evidence import decline_reason
from diag.engine.diagnosis import LABELS, Diagnosis, Evidence, Finding, Phase, Recommendation, severity_rank
from diag.engine.evaluate import render
from diag.engine.load_findings import add_load_findings
from diag.engine.policy import Policy, builtin_policy, load_policy
from diag.engine.rules import RecommendationSpec, Rule, load_rules
from diag.engine.verdict import decide
from diag.store.run import Run
from diag.store.safe import int64, number

# The verdict policy (thresholds, label priority) is data: rules/policy.toml.
# Views that style scores read the built-in policy's strong/weak bounds.
STRONG_SCORE = builtin_policy().strong_score
WEAK_SCORE = builtin_policy().weak_score


def diagnose(run: Run, rule_dirs: tuple[str, ...] | list[str] = ()) -> Diagnosis:
    """Classify the run's bottleneck and explain it (DESIGN.md, schema diag.diagnosis/1)."""
    rank_runs = getattr(run, "rank_runs", None)  # a directory of per-rank traces (store/rank_traces.py)
    if rank_runs:
        return _diagnose_rank_traces(run, rank_runs, rule_dirs)
    rules = load_rules(rule_dirs)
    policy = load_policy(rule_dirs)
    phases = compute_phases(run)
    metrics = compute_metrics(run, phases)
    ctx = steady_context(run, phases)
    names = serving.names(ctx)
    d = diagnose_metrics(run, phases, metrics, rules, policy, names)
    d.serving = serving.summary(ctx)
    members = judge_members(run, lambda r: _judge_member(r, rules, policy))
    if members:
        d.serving["members"] = [asdict(m) for m in members]
    ranks, spread = judge_ranks(run, lambda r: _judge_member(r, rules, policy))
    if ranks:  # a multi-rank job: each rank judged on its own rows; the job keeps the whole run's verdict
        d.members, d.ranks = [asdict(m) for m in ranks], spread
    add_load_findings(run, d)
    return d


def _diagnose_rank_traces(run: Run, rank_runs: list[Run], rule_dirs: tuple[str, ...] | list[str]) -> Diagnosis:
    """A job read from one trace per rank: each rank diagnosed as the trace it is; the job's verdict is its
    slowest rank's (a synchronous job goes at the pace of its slowest rank; rank 0's when none is slower)."""
    ranked = [(int((r.manifest.get("distributed") or {}).get("rank", i)), r, diagnose(r, rule_dirs))
              for i, r in enumerate(rank_runs)]
    members, spread = trace_rank_members(ranked)
    slowest = spread.get("slowest_rank", ranked[0][0])
    d = next(dr for rank, _, dr in ranked if rank == slowest)
    d = Diagnosis.from_json(d.to_json())  # a copy: the rank's own stays as judged
    d.run = _run_info(run, d.metrics)
    d.members, d.ranks = [asdict(m) for m in members], {**spread, "verdict_from_rank": slowest}
    return d


def _judge_member(run: Run, rules: list[Rule], policy: Policy) -> Diagnosis:
    """One member (a server worker) judged on its own rows, as a whole run is."""
    phases = compute_phases(run)
    ctx = steady_context(run, phases)
    return diagnose_metrics(run, phases, compute_metrics(run, phases), rules, policy, serving.names(ctx))


# Labels a run can give no evidence for, and what would: shown as "n/a (reason)", never as 0.00.
NO_REQUESTS = ("no requests seen: serve through uvicorn/gunicorn (found with no code change), or wrap each "
               "request in `with diag.request():`")


def _not_judged(metrics: dict[str, float | None]) -> dict[str, str]:
    out = {}
    if not (metrics.get("steady.requests") or 0) > 0:
        out["queueing"] = NO_REQUESTS
    return out


def diagnose_metrics(run: Run, phases: Phases, metrics: dict[str, float | None], rules: list[Rule],
                     policy: Policy | None = None, names: dict[str, str] | None = None) -> Diagnosis:
    """The Diagnosis for already computed phases and metrics (under the built-in policy unless given)."""
    policy = policy or builtin_policy()
    one_time = policy.no_steady_needed
    lacking = _lacking_evidence(run, phases, metrics, policy, imported(run))
    findings: list[Finding] = []
    scores = {label: 0.0 for label in LABELS}
    # A steady-state finding speaks for the part of the run that is not one-time cost.
    steady_weight = 1.0 - min(1.0, max(0.0, metrics.get("coldstart.share") or 0.0))
    fallbacks: list[Finding] = []
    for rule in rules:
        weight = steady_weight if rule.label and rule.label not in one_time else 1.0
        f = evaluate_rule(rule, metrics, weight, policy, names)
        if f is None:
            continue
        if lacking and f.label not in one_time:
            continue  # a steady-state finding on too little steady state is noise
        (fallbacks if rule.fallback else findings).append(f)
        if f.label:
            scores[f.label] = max(scores[f.label], f.score)
    # a fallback only speaks when no sharper rule explained its label
    backed = {f.label for f in findings}
    findings += [f for f in fallbacks if f.label not in backed]

    verdict = decide(scores, metrics, policy)  # runner-up, margin, evidence-based tie-breaks
    primary: str | None = verdict.primary
    idle = not lacking and not any(f.label for f in findings if f not in fallbacks) and _idle(metrics, policy)
    if idle:
        primary = None
        findings.append(_idle_finding(metrics))
    elif primary is None:
        findings.append(_no_verdict(lacking, phases, metrics, imported(run)))
    findings.sort(key=lambda f: (f.label == primary and primary is not None, f.label is not None,
                                 severity_rank(f.severity), f.score), reverse=True)
    partial = _partial_finding(run)
    if partial is not None:  # first: it says what every other finding rests on
        findings.insert(0, partial)
    units = {k: unit(k) for k in metrics if k in BY_NAME}
    return Diagnosis(run=_run_info(run, metrics), primary=primary, scores=scores,
                     phases=[Phase(s.name, round(run.seconds(s.start_ns), 6), round(run.seconds(s.end_ns), 6))
                             for s in phases.spans()],
                     findings=findings, metrics=metrics, units=units, not_judged=_not_judged(metrics),
                     names=dict(names or {}), runner_up=verdict.runner_up if primary else None,
                     margin=verdict.margin if primary else None, tie_break=verdict.tie_break if primary else "")


def evaluate_rule(rule: Rule, metrics: dict[str, float | None], weight: float = 1.0,
                  policy: Policy | None = None, names: dict[str, str] | None = None) -> Finding | None:
    """The finding a rule makes on these metrics, or None when it does not fire.

    `weight` scales the score (the share of the run the finding speaks for);
    `policy` (default: built-in) turns a score into a severity; `names` fill the
    templates' name fields (diag.analysis.serving.NAMES).
    """
    policy = policy or builtin_policy()
    if not rule.when(metrics):
        return None
    score = 1.0
    if rule.score is not None:
        s = rule.score(metrics)
        if s is None:
            return None
        score = min(1.0, max(0.0, float(s)))
    score *= weight
    if rule.label and score <= 0:
        return None
    severity = rule.severity or ("high" if score >= policy.strong_score
                                 else "medium" if score >= policy.weak_score else "low")
    values: dict[str, Any] = dict(metrics)
    values.update(dict.fromkeys(serving.NAMES, serving.UNNAMED))
    values.update(names or {})
    values["score"] = score
    recs = []
    for spec in rule.recommendations:
        if spec.when is not None and not spec.when(metrics):
            continue
        gain = spec.gain(metrics) if spec.gain is not None else None
        vals = {**values, "gain": gain}
        recs.append(Recommendation(text=render(spec.text, vals), code=spec.code,
                                   expected_gain=render(spec.expected_gain, vals) if spec.expected_gain
                                   and (spec.gain is None or gain is not None) else "",
                                   link=spec.link, **_gain_numbers(spec, gain, metrics)))
    evidence = [Evidence(e.metric, metrics.get(e.metric), unit(e.metric), e.threshold) for e in rule.evidence]
    return Finding(rule=rule.id, label=rule.label, severity=severity, title=render(rule.title, values),
                   score=round(score, 3), evidence=evidence, recommendations=recs)


def _gain_numbers(spec: RecommendationSpec, gain: Any, metrics: dict[str, float | None]) -> dict[str, Any]:
    """gain_max (the rule's bound), gain_point (its prediction, never above the bound) and gain_on."""
    bound = _factor(gain)
    point = _factor(spec.predict(metrics)) if spec.predict is not None else None
    if point is not None and bound is not None:
        point = min(point, bound)
    return {"gain_max": bound, "gain_point": point, "gain_on": spec.gain_on if bound or point else ""}


def _factor(v: Any) -> float | None:
    """A speed-up factor rounded for JSON, or None for no number (or a nonsense one below 1)."""
    f = number(v) if not isinstance(v, bool) else None
    return round(f, 3) if f is not None and f >= 1.0 else None


def _lacking_evidence(run: Run, phases: Phases, metrics: dict[str, float | None], policy: Policy,
                      trace: bool = False) -> str:
    """Why the steady state cannot be judged ('' when it can)."""
    if trace:  # an imported trace: judged on its steps, or on its kernels where it has none
        return decline_reason(run, metrics)
    if phases.basis == "run":
        return "no steps and no requests were recorded: diag saw no model call to time"
    steady_s = metrics.get("steady.duration_s") or 0.0
    calls = max(metrics.get("steady.steps") or 0.0, metrics.get("steady.requests") or 0.0)
    if steady_s < policy.min_steady_s or calls < policy.min_steady_calls:
        return (f"the steady state is too short to judge ({steady_s:.2f} s, {calls:.0f} steps or requests; "
                f"needs {policy.min_steady_s:g} s and {policy.min_steady_calls})")
    return ""


def _idle(metrics: dict[str, float | None], policy: Policy) -> bool:
    """The stepping thread is mostly idle and serves no requests: paced by a timer or its input rate."""
    inside, outside = metrics.get("steady.inside_model_share"), metrics.get("steady.outside_busy_share")
    if inside is None or outside is None or (metrics.get("steady.requests") or 0) > 0:
        return False
    return inside + outside < policy.idle_busy_max


def _idle_finding(metrics: dict[str, float | None]) -> Finding:
    busy = (metrics.get("steady.inside_model_share") or 0.0) + (metrics.get("steady.outside_busy_share") or 0.0)
    title = (f"The program is idle most of the time: the stepping thread is busy {busy:.0%} of the steady state "
             "(paced by a timer or by its input rate); nothing to speed up")
    text = ("No resource limits this program: it waits for its own schedule or for input that comes slowly. "
            "Make it faster only if each call's latency matters; otherwise it has room for more work.")
    ev = [Evidence("steady.inside_model_share", metrics.get("steady.inside_model_share"), "ratio"),
          Evidence("steady.outside_busy_share", metrics.get("steady.outside_busy_share"), "ratio"),
          Evidence("steady.known_wait_share", metrics.get("steady.known_wait_share"), "ratio")]
    return Finding(rule="verdict.idle", label=None, severity="info", title=title, evidence=ev,
                   recommendations=[Recommendation(text=text)])


def _no_verdict(lacking: str, phases: Phases, metrics: dict[str, float | None], trace: bool = False) -> Finding:
    if lacking and trace:  # the user holds a file: no advice that only applies to live runs
        return Finding(rule="verdict.trace_declined", label=None, severity="info",
                       title=f"No verdict for this trace: {lacking}",
                       evidence=[Evidence("trace.kernels", metrics.get("trace.kernels"), "count"),
                                 Evidence("trace.kernel_ms", metrics.get("trace.kernel_ms"), "ms")])
    if lacking:
        title = f"Too little evidence for a verdict: {lacking}"
        text = ("Run the program longer (diag profile --duration S) so it makes more model calls, or mark "
                "requests with NVTX ranges named 'request'. Model calls are torch.nn.Module forward calls "
                "and onnxruntime InferenceSession.run calls.")
        ev = [Evidence("steady.duration_s", metrics.get("steady.duration_s"), "s"),
              Evidence("steady.steps", metrics.get("steady.steps"), "count")]
    else:
        title = "No bottleneck stands out: no rule found its evidence in this run"
        text = "Look at the metrics below; add a rule of your own with --rules DIR."
        ev = [Evidence("steady.inside_model_share", metrics.get("steady.inside_model_share"), "ratio"),
              Evidence("steady.gpu_busy", metrics.get("steady.gpu_busy"), "ratio")]
    return Finding(rule="verdict.insufficient_evidence" if lacking else "verdict.no_match", label=None,
                   severity="info", title=title, evidence=ev, recommendations=[Recommendation(text=text)])


# What to do about each cause of loss (diag.store.loss.CAUSES), then the generic advice.
_LOSS_FIXES = {
    "file size limit": "raise the file-size limit (ulimit -f unlimited)",
    "disk full": "free disk space or record elsewhere (--out DIR)",
    "disk quota exceeded": "free quota or record elsewhere (--out DIR)",
    "permission denied": "make the run directory writable",
    "read-only file system": "record on a writable file system (--out DIR)",
}


def _partial_finding(run: Run) -> Finding | None:
    """The recording lost rows (run.json `loss`, diag.store.loss): what the verdict rests on."""
    loss = run.manifest.get("loss")
    if not isinstance(loss, dict):
        return None
    seen, lost = number(loss.get("steps_seen")) or 0, number(loss.get("steps_lost")) or 0
    share = lost / seen if seen > 0 and lost > 0 else None
    until = int64(loss.get("recorded_until_ns"))
    duration = run.duration_s
    if until is not None and 0 <= run.seconds(until) <= duration:
        rests = f"rests on the first {run.seconds(until):.2f} s of {duration:.1f} s"
    else:
        rests = "rests on incomplete step rows"
    what = f"{share:.0%} of the steps were lost" if share else "rows were lost"
    reason = str(loss.get("reason") or "")[:300]
    title = f"Partial run: this verdict {rests}: {what}" + (f" ({reason})" if reason else "")
    causes = [str(c) for c in loss.get("causes") or [] if isinstance(c, str)]
    fixes = [_LOSS_FIXES[c] for c in causes if c in _LOSS_FIXES]
    if loss.get("no_end"):
        fixes.append("let the program exit normally (os._exit, a crash or a kill skip diag's last flush)")
    text = ("Profile again after you " + "; ".join(fixes) + ".") if fixes else "Profile again."
    ev = [Evidence("loss.steps_lost", lost, "count"), Evidence("loss.steps_seen", seen, "count")]
    if share is not None:
        ev.append(Evidence("loss.share", share, "ratio"))
    return Finding(rule="run.partial", label=None, severity="high" if share is None or share >= 0.1 else "medium",
                   title=title, evidence=ev,
                   recommendations=[Recommendation(text=text, link="docs/run-format.md#what-can-be-lost")])


def _run_info(run: Run, metrics: dict[str, float | None]) -> dict[str, Any]:
    m = run.manifest
    devices = (m.get("gpu") or {}).get("devices") or []
    return {"command": m.get("command", []), "exit_code": m.get("exit_code"),
            "duration_s": round(run.duration_s, 3),
            "device": "cuda" if metrics.get("run.gpu") else "cpu",
            "gpu": devices[0].get("name") if devices else None,
            "run_id": m.get("run_id"), "partial": run.partial,
            **({"imported_from": m["imported_from"]} if m.get("imported_from") else {})}
