"""Hugging Face transformers generate() as a prefill/scoring job: long prompts, one new token.

A Llama-style model built from a config with random weights (nothing
downloaded). On a GPU: batch 32 x 1024 tokens, bf16; on CPU a smaller shape.

Runs 30 s of calls by default: a job like this runs for long, and its start-up
must not be most of the run, or the run is start-up-bound and cold_start is
the right verdict for it (docs/accuracy.md). The random weights are made on
the device, as `from_pretrained(..., device_map="cuda")` would place real
ones, not in fp32 on the host first. Start-up on the H200 host is still
~17 s (torch import ~5 s; importing transformers and building the model
~10 s).
"""

from __future__ import annotations


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0], seconds=30.0)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    gpu = a.device == "cuda"
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024 if gpu else 256, intermediate_size=2816 if gpu else 688,
                      num_hidden_layers=8 if gpu else 4, num_attention_heads=16 if gpu else 4,
                      num_key_value_heads=16 if gpu else 4, max_position_embeddings=2048)
    torch.manual_seed(0)
    with torch.device(a.device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16 if gpu else torch.float32).eval()
    batch, length = (32, 1024) if gpu else (4, 256)
    stop = Stop(a.seconds)
    n = 0
    with torch.inference_mode():
        while not stop:
            ids = torch.randint(0, cfg.vocab_size, (batch, length), device=a.device)
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, do_sample=False,
                                 pad_token_id=0, output_scores=True, return_dict_in_generate=True)
            out.scores[0].float().log_softmax(-1).max(-1).values.cpu()
            n += batch
    report("hf_prefill_scoring", n, "prompts", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
