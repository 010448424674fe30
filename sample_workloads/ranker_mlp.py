"""Online ranking: a deep, narrow residual MLP scores one candidate at a time.

Each step builds the feature vector of one (user, item) pair on the device and
runs it through 32 small residual blocks, then reads the score back.
"""

from __future__ import annotations

import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

WIDTH, BLOCKS = 64, 32


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(self.norm(x)))


class Ranker(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.user = nn.Embedding(1000, WIDTH // 2)
        self.item = nn.Embedding(5000, WIDTH // 2)
        self.blocks = nn.Sequential(*[Block() for _ in range(BLOCKS)])
        self.out = nn.Linear(WIDTH, 1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.user(user), self.item(item)], dim=-1)
        return torch.sigmoid(self.out(self.blocks(x)))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    model = Ranker().to(args.device).eval()
    users = torch.randint(0, 1000, (256, 1), device=args.device)
    items = torch.randint(0, 5000, (256, 1), device=args.device)

    deadline = Deadline(args.seconds)
    steps, best = 0, 0.0
    with torch.inference_mode():
        while not deadline.done():
            score = model(users[steps % 256], items[steps % 256]).item()
            best = max(best, score)
            steps += 1
    sync(args.device)
    summary("ranker_mlp", args.device, steps, "candidates", deadline.elapsed(), f"best score {best:.3f}")


if __name__ == "__main__":
    main()
