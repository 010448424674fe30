"""The online ranker of ranker_mlp.py, sized by flags: shared by its CUDA-graph and compiled twins.

Default size is ranker_mlp's (width 64, 32 blocks, one candidate per call);
`--large` makes a step long enough (about a millisecond of fp32 GEMMs on an
H200) that per-step costs are small next to it.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

LARGE = {"width": 2048, "blocks": 32, "batch": 128}


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


class Ranker(nn.Module):
    def __init__(self, width: int = 64, blocks: int = 32) -> None:
        super().__init__()
        self.user = nn.Embedding(1000, width // 2)
        self.item = nn.Embedding(5000, width // 2)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(blocks)])
        self.out = nn.Linear(width, 1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.user(user), self.item(item)], dim=-1)
        return torch.sigmoid(self.out(self.blocks(x)))


def add_size_flags(parser: argparse.ArgumentParser) -> None:
    """--width/--blocks/--batch, and --large for the long-step variant."""
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--blocks", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1, help="candidates scored per call")
    parser.add_argument("--large", action="store_true",
                        help=f"width {LARGE['width']}, {LARGE['blocks']} blocks, batch {LARGE['batch']}")


def build(args: argparse.Namespace) -> tuple[Ranker, torch.Tensor, torch.Tensor]:
    """The model on args.device in eval mode, and 256 precomputed (user, item) batches."""
    if args.large:
        args.width, args.blocks, args.batch = LARGE["width"], LARGE["blocks"], LARGE["batch"]
    model = Ranker(args.width, args.blocks).to(args.device).eval()
    users = torch.randint(0, 1000, (256, args.batch), device=args.device)
    items = torch.randint(0, 5000, (256, args.batch), device=args.device)
    return model, users, items
