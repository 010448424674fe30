"""Hugging Face transformers generate() as a prefill/scoring job: long prompts, one new token.

A Llama-style model built from a config with random weights (nothing
downloaded). On a GPU: Llama-2-7B's layer shape (width 4096, MLP 11008, 32
heads), 4 of its 32 layers, batch 32 x 1024 tokens, bf16; on CPU a smaller
shape. The width matters: a prefill's GEMMs grow with the square of the width
and its unfused elementwise work (RMSNorm's float32 upcasts, rotary
embeddings) only with the width. At width 1024 (this program's first shape)
two thirds of the H200's kernel time went to those elementwise kernels:
not the compute-bound prefill a real model runs (docs/accuracy.md).

Runs 30 s of calls by default: a job like this runs for long, and its start-up
must not be most of the run, or the run is start-up-bound and cold_start is
the right verdict for it (docs/accuracy.md). The random weights are made on
the device, as `from_pretrained(..., device_map="cuda")` would place real
ones, not in fp32 on the host first. Start-up on the H200 host is
~15 s (importing torch and transformers, building the model).
"""

from __future__ import annotations


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0], seconds=30.0)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    gpu = a.device == "cuda"
    cfg = LlamaConfig(vocab_size=32000, hidden_size=4096 if gpu else 256, intermediate_size=11008 if gpu else 688,
                      num_hidden_layers=4, num_attention_heads=32 if gpu else 4,
                      num_key_value_heads=32 if gpu else 4, max_position_embeddings=2048)
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
