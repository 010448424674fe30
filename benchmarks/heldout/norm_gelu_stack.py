"""Feature post-processing over large activation maps in bfloat16.

A stack of LayerNorm -> GELU -> scaled residual -> softmax over the last axis
-> RMS rescale, applied to big [frames, rows, channels] maps already on the
device (as a vision model's dense head would produce). No GEMM at all.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _cli import StopFlag, options, report
from torch import nn

# (frames, rows, channels) per device; bf16: ~1.1 GB per map on cuda, ~6 GB peak
SIZES = {"cpu": (4, 1024, 1024), "cuda": (32, 4096, 4096)}


class DenseHead(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.temperature = nn.Parameter(torch.tensor(0.7))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.norm(x))
        y = x + 0.5 * y
        p = torch.softmax(y / self.temperature, dim=-1)
        return p * torch.rsqrt(p.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


def main() -> None:
    a = options(__doc__.splitlines()[0])
    frames, rows, ch = SIZES[a.device]
    head = DenseHead(ch).to(a.device, torch.bfloat16).eval()
    maps = torch.randn(frames, rows, ch, device=a.device, dtype=torch.bfloat16)
    stop = StopFlag(a.seconds)
    n = 0
    with torch.inference_mode():
        while not stop:
            out = head(maps)
            n += frames
            if n % (frames * 16) == 0:
                out[:, 0, :8].float().cpu()  # a few values to the logger
    if a.device == "cuda":
        torch.cuda.synchronize()
    report("norm_gelu_stack", n, "maps", stop.elapsed(), a.device, f"{rows}x{ch} bf16")


if __name__ == "__main__":
    main()
