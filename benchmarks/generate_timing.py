"""Does diag's generate() timing agree with the program's own? (issue 11)

Two modes:

    python benchmarks/generate_timing.py --device cuda --seconds 20 --own OWN.json
        the program: a Llama-style model from a config (random weights, nothing
        downloaded), batch-1 greedy generate() of 64 new tokens from a 32-token
        prompt in a loop; it times itself the way a user would, with a
        streamer (time to first token = first new token handed to the
        streamer; time per output token = the gaps between the later ones) and
        writes the medians and tokens/s to OWN.json. The first WARMUP calls
        are left out (diag leaves its warm-up out too).

    python benchmarks/generate_timing.py --compare OWN.json DIAG.json
        DIAG.json is `diag analyze RUN --json` of the same program run under
        `diag profile`: prints both figures and their difference (target: 5%).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

WARMUP = 3
PAIRS = (("ttft_p50_ms", "steady.ttft_p50_ms"), ("tpot_p50_ms", "steady.tpot_p50_ms"),
         ("tokens_per_s", "steady.gen_tokens_per_s"))


class TokenClock:
    """A generate() streamer that notes when each new token reaches it (the first put is the prompt)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value: object) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def run(device: str, seconds: float, own: str, layers: int, new_tokens: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=layers,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=512)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(device).eval()
    ttft, tpot, tokens, busy = [], [], 0, 0.0
    t_end = time.monotonic() + seconds
    calls = 0
    with torch.inference_mode():
        while time.monotonic() < t_end:
            ids = torch.randint(0, cfg.vocab_size, (1, 32), device=device)
            clock = TokenClock()
            t0 = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                 do_sample=False, pad_token_id=0, streamer=clock)
            t1 = time.perf_counter()
            calls += 1
            if calls <= WARMUP or not clock.times:
                continue
            ttft.append((clock.times[0] - t0) * 1e3)
            tpot += [(b - a) * 1e3 for a, b in zip(clock.times, clock.times[1:], strict=False)]
            tokens += out.shape[1] - ids.shape[1]
            busy += t1 - t0
    figures = {"calls": calls - WARMUP, "ttft_p50_ms": statistics.median(ttft), "tpot_p50_ms": statistics.median(tpot),
               "tokens_per_s": tokens / busy}
    with open(own, "w") as f:
        json.dump(figures, f)
    print(f"[generate_timing] {json.dumps(figures)}", flush=True)


def compare(own_path: str, diag_path: str) -> int:
    own = json.load(open(own_path))
    diagnosis = json.load(open(diag_path))
    metrics = diagnosis.get("metrics", {})
    print(f"verdict: {diagnosis.get('primary')}  calls: own {own['calls']}, diag {metrics.get('steady.generate_calls')}")
    print(f"{'figure':<14}{'program':>10}{'diag':>10}{'diff':>9}")
    worst = 0.0
    for mine, theirs in PAIRS:
        a, b = own[mine], metrics.get(theirs)
        diff = None if b is None else (b - a) / a
        worst = max(worst, abs(diff) if diff is not None else 1.0)
        print(f"{mine:<14}{a:>10.3f}{'–' if b is None else format(b, '.3f'):>10}"
              f"{'–' if diff is None else format(diff, '+.1%'):>9}")
    return 0 if worst <= 0.05 else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--own", help="where the program writes its own figures")
    p.add_argument("--layers", type=int, default=6, help="decoder layers (fewer for a quick CPU check)")
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--compare", nargs=2, metavar=("OWN.json", "DIAG.json"))
    a = p.parse_args()
    if a.compare:
        return compare(*a.compare)
    if not a.own:
        p.error("--own OUT.json (the program) or --compare OWN.json DIAG.json")
    run(a.device, a.seconds, a.own, a.layers, a.new_tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
