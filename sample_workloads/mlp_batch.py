"""Batch scoring of precomputed feature vectors with a small MLP.

The feature batches live in ordinary (pageable) host memory, as they would after
being read from a feature store; each step moves one batch to the device, scores
it, and brings the scores back.
"""

from __future__ import annotations

import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

FEATURES = 1024
BATCH = {"cpu": 4096, "cuda": 65536}  # 65536 x 1024 fp32 = 256 MiB per batch


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    batch = BATCH[args.device]
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1)).to(args.device).eval()
    host_batches = [torch.randn(batch, FEATURES) for _ in range(4)]

    deadline = Deadline(args.seconds)
    steps = 0
    with torch.inference_mode():
        while not deadline.done():
            features = host_batches[steps % len(host_batches)].to(args.device)
            scores = model(features).squeeze(1).cpu()
            steps += 1
    sync(args.device)
    summary(
        "mlp_batch",
        args.device,
        steps * batch,
        "rows",
        deadline.elapsed(),
        f"mean score {float(scores.mean()):.3f}",
    )


if __name__ == "__main__":
    main()
