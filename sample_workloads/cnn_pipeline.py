"""Image classification with a small CNN behind a numpy augmentation pipeline.

Each step builds a batch: "decodes" raw uint8 frames, then random-resized-crops,
flips, colour-jitters, blurs and normalizes every image in numpy on the main
thread, and only then runs the CNN on the result.
"""

from __future__ import annotations

import numpy as np
import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

BATCH = 32
SIDE = 160  # network input side
SOURCE_SIDE = 320  # side of the raw frames before cropping
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def small_cnn() -> nn.Module:
    def block(cin: int, cout: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)
        )

    stem = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), nn.ReLU())  # 4x4 patches
    return nn.Sequential(
        stem, block(8, 16), block(16, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)
    )


def augment(frame: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random rotated-and-scaled crop (bilinear), flip, colour jitter, 5-tap blur, normalize."""
    h, w, _ = frame.shape
    angle, scale = rng.uniform(-0.3, 0.3), rng.uniform(0.5, 1.0) * h / SIDE
    cy, cx = rng.uniform(0.4, 0.6) * h, rng.uniform(0.4, 0.6) * w
    grid = np.arange(SIDE, dtype=np.float32) - SIDE / 2
    gy, gx = np.meshgrid(grid, grid, indexing="ij")
    sy = np.clip(cy + scale * (np.cos(angle) * gy - np.sin(angle) * gx), 0, h - 2)
    sx = np.clip(cx + scale * (np.sin(angle) * gy + np.cos(angle) * gx), 0, w - 2)
    y0, x0 = sy.astype(np.int32), sx.astype(np.int32)
    fy, fx = (sy - y0)[..., None], (sx - x0)[..., None]
    src = frame.astype(np.float32) / 255.0
    img = (1 - fy) * ((1 - fx) * src[y0, x0] + fx * src[y0, x0 + 1]) + fy * (
        (1 - fx) * src[y0 + 1, x0] + fx * src[y0 + 1, x0 + 1]
    )
    if rng.random() < 0.5:
        img = img[:, ::-1]
    img = img * rng.uniform(0.8, 1.2, size=3).astype(np.float32) + np.float32(rng.uniform(-0.1, 0.1))
    gray = img.mean(axis=2, keepdims=True)
    img = gray + (img - gray) * np.float32(rng.uniform(0.7, 1.3))
    taps = np.array([1, 4, 6, 4, 1], dtype=np.float32) / 16
    for axis in (0, 1):
        img = sum(t * np.roll(img, k - 2, axis=axis) for k, t in enumerate(taps))
    img = (np.clip(img, 0, 1) - MEAN) / STD
    return np.ascontiguousarray(img.transpose(2, 0, 1), dtype=np.float32)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    rng = np.random.default_rng(0)
    model = small_cnn().to(args.device).eval()
    raw = [rng.integers(0, 256, (SOURCE_SIDE, SOURCE_SIDE, 3), dtype=np.uint8).tobytes() for _ in range(64)]

    deadline = Deadline(args.seconds)
    steps = 0
    with torch.inference_mode():
        while not deadline.done():
            frames = [
                np.frombuffer(raw[(steps * BATCH + i) % len(raw)], np.uint8).reshape(
                    SOURCE_SIDE, SOURCE_SIDE, 3
                )
                for i in range(BATCH)
            ]
            batch = torch.from_numpy(np.stack([augment(f, rng) for f in frames])).to(args.device)
            classes = model(batch).argmax(dim=1).cpu()
            steps += 1
    sync(args.device)
    summary(
        "cnn_pipeline",
        args.device,
        steps * BATCH,
        "images",
        deadline.elapsed(),
        f"last batch class 0 count {int((classes == 0).sum())}",
    )


if __name__ == "__main__":
    main()
