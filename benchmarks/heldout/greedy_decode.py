"""Greedy text generation with a small decoder-only transformer, one request at a time.

Batch 1, no KV cache: each new token re-runs the model over the context so
far, takes the argmax and reads it back with `.item()` to test for the end
token, as simple generation loops do. A new prompt starts every 48 tokens.
"""

from __future__ import annotations

import torch
from _cli import StopFlag, options, report
from torch import nn

VOCAB, WIDTH, LAYERS, HEADS, PROMPT, NEW_TOKENS = 8192, 256, 4, 4, 16, 48
END = 3


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(PROMPT + NEW_TOKENS, WIDTH)
        layer = nn.TransformerDecoderLayer(WIDTH, HEADS, 4 * WIDTH, batch_first=True, norm_first=True)
        self.layers = nn.ModuleList(layer if i == 0 else nn.TransformerDecoderLayer(
            WIDTH, HEADS, 4 * WIDTH, batch_first=True, norm_first=True) for i in range(LAYERS))
        self.out = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(n, device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
        for layer in self.layers:
            # decoder-only: the layer's cross-attention reads the sequence itself
            x = layer(x, x, tgt_mask=mask, memory_mask=mask)
        return self.out(x[:, -1])


def main() -> None:
    a = options(__doc__.splitlines()[0])
    torch.manual_seed(0)
    model = TinyLM().to(a.device).eval()
    gen = torch.Generator().manual_seed(1)
    stop = StopFlag(a.seconds)
    tokens = prompts = 0
    with torch.inference_mode():
        while not stop:
            ids = torch.randint(4, VOCAB, (1, PROMPT), generator=gen).to(a.device)
            for _ in range(NEW_TOKENS):
                nxt = model(ids).argmax(dim=-1, keepdim=True)
                tokens += 1
                if nxt.item() == END or stop:
                    break
                ids = torch.cat([ids, nxt], dim=1)
            prompts += 1
    report("greedy_decode", tokens, "tokens", stop.elapsed(), a.device, f"{prompts} prompts, batch 1")


if __name__ == "__main__":
    main()
