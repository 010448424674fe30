"""Per-pixel enhancement of video frames: exposure, white balance, gamma, tone
curve, saturation and normalization, all elementwise on full-resolution frames.

Frames are made once on the device (as if decoded there); each step enhances a
batch and reads back one brightness value per frame.
"""

from __future__ import annotations

import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

# (batch, height, width): 4K frames on the GPU, a quarter of 1080p on the CPU.
SHAPES = {"cpu": (1, 540, 960), "cuda": (8, 2160, 3840)}


class Enhance(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.tensor(1.2))
        self.balance = nn.Parameter(torch.tensor([1.05, 1.0, 0.92]).view(1, 3, 1, 1))
        self.gamma = nn.Parameter(torch.tensor(1 / 2.2))
        self.norm = nn.GroupNorm(1, 3)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = frames * self.gain * self.balance
        x = x.clamp(1e-4, 1.0).pow(self.gamma)
        x = x / (1.0 + x) * 2.0  # Reinhard-style tone curve
        gray = x.mean(dim=1, keepdim=True)
        x = gray + (x - gray) * 1.3  # saturation
        x = torch.sigmoid((x - 0.5) * 4.0)  # contrast S-curve
        x = self.norm(x)
        return (x * 0.25 + 0.5).clamp(0.0, 1.0)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    batch, height, width = SHAPES[args.device]
    model = Enhance().to(args.device).eval()
    frames = [torch.rand(batch, 3, height, width, device=args.device) for _ in range(2)]

    deadline = Deadline(args.seconds)
    steps = 0
    with torch.inference_mode():
        while not deadline.done():
            brightness = model(frames[steps % 2]).mean(dim=(1, 2, 3)).cpu()
            steps += 1
    sync(args.device)
    summary(
        "image_enhance",
        args.device,
        steps * batch,
        "frames",
        deadline.elapsed(),
        f"last mean brightness {float(brightness.mean()):.3f}",
    )


if __name__ == "__main__":
    main()
