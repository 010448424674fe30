"""A short scoring job with a VGG-style classifier: load a large checkpoint,
warm up, score a handful of image batches, exit.

There is no checkpoint to download, so the job first writes one (a large
fully connected head, as in VGG) to a temp file, then loads it the usual way:
build the model, `torch.load` the state dict, move it to the device.
"""

from __future__ import annotations

import os
import tempfile
import time

import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

HIDDEN = {"cpu": 6144, "cuda": 8192}  # head width: ~550 MB of weights on CPU, ~850 MB on GPU
BATCH, SIDE, BATCHES = 4, 128, 4


class VGGStyle(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        layers, cin = [], 3
        for cout in (16, 32, 64, 256):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(256 * (SIDE // 16) ** 2, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1000),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    deadline = Deadline(args.seconds)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vgg_style.pt")
        torch.save(VGGStyle(HIDDEN[args.device]).state_dict(), path)
        size_mb = os.path.getsize(path) / 1e6

        started = time.perf_counter()
        model = VGGStyle(HIDDEN[args.device])
        model.load_state_dict(torch.load(path, map_location="cpu"))
        model = model.to(args.device).eval()
    torch.backends.cudnn.benchmark = True
    images = torch.rand(BATCH, 3, SIDE, SIDE, device=args.device)
    with torch.inference_mode():
        model(images)  # first call: kernel selection and allocator warm-up
        sync(args.device)
        ready = time.perf_counter() - started

        deadline.restart(args.seconds)  # --seconds caps the scoring loop only; the job ends after BATCHES
        scored = 0
        while scored < BATCHES * BATCH and not deadline.done():
            top = model(images).argmax(dim=1).cpu()
            scored += BATCH
    summary(
        "vgg_job",
        args.device,
        scored,
        "images",
        deadline.elapsed(),
        f"model of {size_mb:.0f} MB ready in {ready:.1f} s, top class {int(top[0])}",
    )


if __name__ == "__main__":
    main()
