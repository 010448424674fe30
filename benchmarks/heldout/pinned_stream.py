"""Streaming token-feature scoring with the host->device upload overlapped.

Each step a large bfloat16 feature block arrives in one of two pinned host
buffers (double buffering); it is uploaded with non_blocking=True on a side
stream while the previous block runs through a wide MLP on the default
stream. The upload should hide behind the math.
"""

from __future__ import annotations

import torch
from _cli import StopFlag, options, report
from torch import nn

# (rows per block, width, hidden, layers) per device; cuda block: 32768 x 2048 bf16 = 128 MiB
SIZES = {"cpu": (1024, 512, 2048, 2), "cuda": (32768, 2048, 8192, 4)}


class WideMLP(nn.Module):
    def __init__(self, width: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*[nn.Sequential(nn.Linear(width, hidden), nn.SiLU(), nn.Linear(hidden, width))
                                    for _ in range(layers)])
        self.score = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score(self.body(x)).squeeze(-1)


def main() -> None:
    a = options(__doc__.splitlines()[0])
    rows, width, hidden, layers = SIZES[a.device]
    cuda = a.device == "cuda"
    model = WideMLP(width, hidden, layers).to(a.device, torch.bfloat16).eval()
    host = [torch.randn(rows, width, dtype=torch.bfloat16, pin_memory=cuda) for _ in range(2)]
    side = torch.cuda.Stream() if cuda else None
    stop = StopFlag(a.seconds)
    blocks = 0
    with torch.inference_mode():
        if cuda:
            with torch.cuda.stream(side):
                nxt = host[0].to(a.device, non_blocking=True)
        else:
            nxt = host[0]
        while not stop:
            if cuda:
                torch.cuda.current_stream().wait_stream(side)
                cur = nxt
                cur.record_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):  # next block's upload overlaps this block's math
                    nxt = host[(blocks + 1) % 2].to(a.device, non_blocking=True)
            else:
                cur = host[blocks % 2]
            scores = model(cur)
            if blocks % 16 == 15:
                scores[:4].float().cpu()
            blocks += 1
    if cuda:
        torch.cuda.synchronize()
    mib = rows * width * 2 / 2**20
    report("pinned_stream", blocks, "blocks", stop.elapsed(), a.device, f"{mib:.0f} MiB uploaded per block")


if __name__ == "__main__":
    main()
