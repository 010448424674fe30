"""mlp_batch with its fix applied: pinned host batches copied with non_blocking=True.

The same model, batch sizes and loop as sample_workloads/mlp_batch.py; the host
batches are allocated in pinned memory (on CUDA; the CPU has nothing to pin), so
each copy runs at full PCIe speed without a bounce buffer and does not block the host.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from _common import Deadline, parse_args, summary, sync  # noqa: E402
from mlp_batch import BATCH, FEATURES  # noqa: E402
from torch import nn  # noqa: E402


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    batch = BATCH[args.device]
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1)).to(args.device).eval()
    pin = args.device == "cuda"
    host_batches = [torch.randn(batch, FEATURES).pin_memory() if pin else torch.randn(batch, FEATURES)
                    for _ in range(4)]

    deadline = Deadline(args.seconds)
    steps = 0
    with torch.inference_mode():
        while not deadline.done():
            features = host_batches[steps % len(host_batches)].to(args.device, non_blocking=True)
            scores = model(features).squeeze(1).cpu()
            steps += 1
    sync(args.device)
    summary("mlp_batch_pinned", args.device, steps * batch, "rows", deadline.elapsed(),
            f"mean score {float(scores.mean()):.3f}")


if __name__ == "__main__":
    main()
