"""Offline batch scoring with a transformer encoder (fp32, large batches).

Inputs are synthetic token ids created once on the device; each step embeds a
batch, runs the encoder and pools a score per sequence.
"""

from __future__ import annotations

import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

# (d_model, layers, batch, sequence length) per device: the GPU shape is BERT-large-like.
SHAPES = {"cpu": (256, 4, 32, 128), "cuda": (1024, 12, 64, 512)}
VOCAB = 30_000


class TextEncoder(nn.Module):
    def __init__(self, d_model: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        layer = nn.TransformerEncoderLayer(d_model, d_model // 64, 4 * d_model, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    d_model, layers, batch, seq = SHAPES[args.device]
    model = TextEncoder(d_model, layers).to(args.device).eval()
    batches = [torch.randint(0, VOCAB, (batch, seq), device=args.device) for _ in range(4)]

    deadline = Deadline(args.seconds)
    steps = 0
    with torch.inference_mode():
        while not deadline.done():
            labels = model(batches[steps % len(batches)]).argmax(dim=1).cpu()
            steps += 1
    sync(args.device)
    summary(
        "encoder_batch",
        args.device,
        steps * batch,
        "sequences",
        deadline.elapsed(),
        f"last batch positives {int(labels.sum())}",
    )


if __name__ == "__main__":
    main()
