"""Hugging Face transformers generate(): batch-1 greedy decode with a KV cache.

A small Llama-style model from a config with random weights (nothing
downloaded); each call decodes 64 new tokens from a 32-token prompt.

Runs 30 s of calls by default: a job like this runs for long, and its start-up
(importing transformers, building the model on the host, CUDA set-up: ~14 s
on the H200) must not be most of the run, or the run is start-up-bound and
cold_start is the right verdict for it (docs/accuracy.md).
"""

from __future__ import annotations


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0], seconds=30.0)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=6,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=512)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(a.device).eval()
    stop = Stop(a.seconds)
    tokens = 0
    with torch.inference_mode():
        while not stop:
            ids = torch.randint(0, cfg.vocab_size, (1, 32), device=a.device)
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=64, min_new_tokens=64,
                                 do_sample=False, pad_token_id=0)
            tokens += out.shape[1] - ids.shape[1]
    report("hf_greedy_decode", tokens, "tokens", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
