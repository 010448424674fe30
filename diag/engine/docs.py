"""docs/rules.md, generated from the built-in rule files: `python -m diag.engine.docs`.

Recommendation links point at the anchors written here (`rules.anchor`).
"""

from __future__ import annotations

import pathlib
import sys

from diag.engine.policy import builtin_policy_text
from diag.engine.rules import anchor, builtin_rule_files, parse_rule_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_INTRO = """# Rules

diag's verdict comes from these rules (the TOML files in `rules/`, shipped
inside the wheel). Each rule has a condition over the metrics of
[metrics.md](metrics.md), a score in [0, 1] for the label it backs, the
metrics it cites as evidence, and recommendations whose expected gain is an
upper bound computed from the run's own time shares (`limit(share)` =
1 / (1 - share): the whole share removed; `amdahl(share, k)`: that share made
k times faster).

A label's score is the highest score of its rules that fired, multiplied by
the share of the run that is not one-time startup cost (for every label but
`cold_start`). The primary label is the best-scoring one; where the two best
are closer than `ties.close_margin`, evidence that separates them decides
(the policy's tie-breakers, below), else the more specific explanation. The
Diagnosis reports the runner-up and the margin (winner minus runner-up), and
every view shows them. A rule that needs a metric the run did not record does
not fire.

## Principles the metrics follow

These hold for every rule (issue 12: programs nobody wrote for diag):

- **Set-up between warm-up steps is warm-up.** Compiling, serializing, writing
  and reading back a cache between warm-up calls is one-time cost even where
  each step is already fast: a long pause between steps that does not recur
  in the last quarter of the steps ends the warm-up no earlier than after it,
  and all of the warm-up beyond its steps' count times the steady step cycle
  counts toward `coldstart.share`.
- **One-time cost is weighed against the work it precedes.** `coldstart.share`
  is the one-time excess over the run less the time no label can act on:
  diag's own start-up, waits for a core, and the baseline every program of
  its kind pays (importing torch, creating the CUDA context). Left in the
  denominator, that baseline diluted a short job's start-up with time that is
  not its steady work either: a server that spends 4 s compiling and caching
  engines, then serves a 2 s burst, is start-up-bound however long importing
  torch took. A long run amortises the same start-up and keeps its
  steady-state label.
- **A slower host is no warm-up.** A warm-up is the model settling
  (allocations, autotuning, compiling, caches filling): its steps are slow,
  the program's own work between them is not. Where the time between steps
  stretched by at least half as much as the steps did, the whole process ran
  slower (CPU clocks, a neighbour on the host): that stretch is steady state,
  not one-time cost (`host_slowed` in diag/analysis/phases.py).
- **Stack samples say how the time splits; the hooks say how much there
  was.** A py-spy sample's length is coarse (a run of one stack is merged
  into one sample; 10-20 Hz on a small host), so a sample that caught a
  2 ms model call can stretch over the sleep after it. The stepping thread's
  sampled time outside the model is scaled to the time outside the model
  that the step hooks measured before it is split into work, known waits and
  reads.
- **A thread on the CPU is not waiting.** A stack sample in a read frame
  counts toward `steady.io_wait_share` only where the thread was off the CPU
  (the sampler's idle flag, and at most the thread's measured off-CPU time): a
  decoder reading from an in-memory file object (Pillow, gzip) is working.
- **Waiting for the GPU is GPU time.** Time in a synchronizing call or a
  blocking copy is never work outside the model, wherever it sits; and with
  the GPU busy, host time outside the model (a wait the hooks cannot see,
  such as `bool()` of a CUDA tensor in `generate()`) backs no host label.
- **Waiting for a CPU is neither compute nor I/O.** Time the stepping thread
  sat runnable but queued for a core (schedstat) is taken out of every share
  of its time (inside the model, busy or waiting outside it), of start-up and
  of warm-up; a wait longer than the time the thread was blocked by schedstat
  counts as wanting a core. Other processes holding the cores
  (`steady.other_cpu_cores`) is a finding without a label
  (`host.cpu_contention`); in a batch program only its own threads
  oversubscribing the cores back `cpu_bound` (a server shares its cores with
  the load it serves: `cpu.oversubscribed` still speaks there). The same
  program gets the same verdict on a busy host.
- **Close scores are decided by evidence, never by reshaping scores**: thread
  on or off the CPU, GPU busy, the share of the run spent starting up.
- **A pre-warm call is one-time cost however few steps follow it.** A short
  batch job may warm up more shapes than it then scores: leading calls on
  shapes never seen again are warm-up wherever they fall in the run, as long
  as steps repeating one shape follow them.
- **A wait for one's own workers is waiting, whatever the sampler's idle
  flag says.** A thread blocked in the pipe or queue to its worker processes
  (a DataLoader's `poll`/`select`) is woken by each batch and sits runnable in
  that frame: its samples there count as a known wait, never as work outside
  the model.
- **Workers queued for a core still want it.** Input workers are judged on
  the cores they want (`steady.worker_cpu_demand`: their CPU plus their
  threads' waits for a core), not only the cores a busy host gave them.
- **A saturated event loop is the cause, the queue its symptom.** Requests
  reach a batcher or model thread only when the event loop hands them over:
  where the loop is held longer than the model runs, the queue in front of
  the model and the wait before the handler back no `queueing`, and the
  loop's own finding names the cause (`cpu_bound` where its thread works,
  `io_bound` where it is blocked in a call). The loop is held while its
  thread runs or waits for a core (`steady.loop_held_share`), not only while
  the lag probe sees late ticks: a tick runs over 5 ms late only in the part
  of a hold more than 5 ms before its end, most of a short hold (~10 ms of
  tokenizing per request) goes unseen. A queue behind a model that runs
  nearly all the time, with the loop thread mostly idle, stays `queueing`.
- **Over capacity, the queue is the verdict and the busy model its reason.**
  Where requests wait longer than they are served (`steady.queue_wait_ratio`
  >= 1) behind the model running others' work
  (`steady.queue_behind_model_share`), the wait is what a user sees and it
  grows with the load, not with the model: `queueing` is primary on a CPU
  or a GPU and at any batch size, the most specific label
  (`labels.priority`). The model's compute is why, and is still found: the
  compute rules step back for that queue (`compute_bound` secondary), and
  the queue's own findings name the model as the limit. Batch size and a
  busy model or GPU pick the fix (batch more where batches are small;
  cheaper calls or more instances where they are full), not the label.
  Requests served about as fast as they arrive leave the model's time as
  the latency: `compute_bound`.
- **A request waiting in the kernel is queued.** Before a server accepts a
  connection or reads a request from it, the request waits in the kernel
  (the listening socket's accept queue, unread bytes on a kept-alive
  connection), where the server's own timing cannot see it. diag samples
  both for the target's listening ports (`sockets` table) and turns them
  into a mean wait per request by Little's law (`steady.backlog_wait_ms`):
  it counts as time before the handler (`steady.pre_handler_wait_share`),
  and so a sync worker busy with the previous request is `queueing` once
  requests wait there longer than they are served, with the compute rules
  stepping back as for a queue behind the model.
- **A request thread off the CPU in its handler is waiting.** A
  thread-per-request (WSGI) worker idles between requests, so time off the
  CPU says nothing about it there; inside the handler it does. Its handler
  time spent neither on a CPU nor queued for one (the thread's own CPU
  counters: py-spy calls a thread asleep in `time.sleep` active), less the
  model's time and waits on the program's own threads or queues, is
  `steady.handler_blocked_share`: a worker held by a blocking call is
  `io_bound`, with the call's frame named.

Add your own rules with `diag analyze RUN --rules DIR` (every `*.toml` in DIR
but `policy.toml`, same format; see `diag/engine/rules.py`). An evidence
metric that `when` compares with a number shows that comparison as its
threshold: it is derived, not typed twice (an explicit `threshold` must match).

This page is generated (`python -m diag.engine.docs`); a test keeps it in sync.
"""


_POLICY = """
## Verdict policy

How scores become a verdict (the minimum steady state, when a score counts as
strong or weak, when a program is idle, and which label wins a tie) is data,
not code: `rules/policy.toml`, read and checked once. A `--rules DIR` may hold
its own `policy.toml`; every key it sets replaces the built-in one (the others
stay), and `labels.priority` must still list every label exactly once. Views
style scores (strong, weak) by the built-in values.

```toml
{text}```
"""


def rules_markdown() -> str:
    """The text of docs/rules.md."""
    out = [_INTRO, _POLICY.format(text=builtin_policy_text()[1])]
    for name, text in builtin_rule_files():
        raw = {r["id"]: r for r in tomllib.loads(text)["rule"]}
        header = []
        for ln in text.splitlines():  # the comment block at the top of the file
            if not ln.startswith("#"):
                break
            header.append(ln[1:].strip())
        out.append(f"\n## {name}\n")
        if header:
            out.append(" ".join(header) + "\n")
        for rule in parse_rule_file(name, text):
            r = raw[rule.id]
            out.append(f'<a id="{anchor(rule.id)}"></a>\n### `{rule.id}`\n')
            out.append(f"- label: `{rule.label or '(advice only)'}`")
            out.append(f"- fires when: `{r['when']}`")
            if "score" in r:
                out.append(f"- score: `{r['score']}`")
            out.append("- evidence: " + ", ".join(f"`{e.metric}`" + (f" (`{e.threshold}`)" if e.threshold else "")
                                                 for e in rule.evidence))
            out.append(f"- title: {r['title']}\n")
            for rec in r.get("recommendation", []):
                cond = f" *(when `{rec['when']}`)*" if "when" in rec else ""
                out.append(f"**Fix**{cond}: {rec['text']}\n")
                if rec.get("code"):
                    out.append("```\n" + rec["code"].rstrip() + "\n```\n")
                if rec.get("gain"):
                    out.append(f"Expected gain: `{rec['gain']}` — {rec.get('expected_gain', '')}\n")
                elif rec.get("expected_gain"):
                    out.append(f"Expected gain: {rec['expected_gain']}\n")
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    path = pathlib.Path(__file__).resolve().parents[2] / "docs" / "rules.md"
    path.write_text(rules_markdown())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
