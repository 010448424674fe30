"""Offline image tagging with a Vision Transformer in bfloat16 autocast.

Patch embedding by a strided conv, pre-norm blocks with fused
scaled_dot_product_attention, class-token head. Large batches of images that
are already on the device (a decoded-image cache), so the model's GEMMs are
all there is to do.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from _cli import StopFlag, options, report
from torch import nn

# (width, depth, heads, image side, batch) per device
SIZES = {"cpu": (256, 6, 4, 128, 16), "cuda": (768, 12, 12, 224, 256)}
PATCH = 16


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.n2(x))))


class ViT(nn.Module):
    def __init__(self, width: int, depth: int, heads: int, side: int, classes: int = 1000) -> None:
        super().__init__()
        self.patchify = nn.Conv2d(3, width, PATCH, stride=PATCH)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.pos = nn.Parameter(torch.randn(1, (side // PATCH) ** 2 + 1, width) * 0.02)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        x = self.patchify(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x[:, 0]))


def main() -> None:
    a = options(__doc__.splitlines()[0])
    width, depth, heads, side, batch = SIZES[a.device]
    model = ViT(width, depth, heads, side).to(a.device).eval()
    cache = torch.rand(4, batch, 3, side, side, device=a.device)  # decoded images, already resident
    stop = StopFlag(a.seconds)
    images, i = 0, 0
    with torch.inference_mode(), torch.autocast(a.device, dtype=torch.bfloat16):
        while not stop:
            tags = model(cache[i % 4]).topk(5, dim=-1).indices
            if i % 8 == 7:
                tags.cpu()  # hand a chunk of results to the writer now and then
            images += batch
            i += 1
    if a.device == "cuda":
        torch.cuda.synchronize()
    report("vit_bf16", images, "images", stop.elapsed(), a.device, f"batch {batch}")


if __name__ == "__main__":
    main()
