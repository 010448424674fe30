"""Batch scoring of image records stored as compressed text files, read by a DataLoader.

At start the program writes a shard of records to a temp directory (each one a
zlib-compressed block of whitespace-separated pixel values, the way some
export pipelines dump them). A Dataset reads, inflates and parses each record
in Python; a DataLoader with two worker processes batches them for a small
ResNet-style classifier.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import zlib

import torch
from _cli import StopFlag, options, report
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE, RECORDS, BATCH = 48, 192, 32


def write_shard(folder: str) -> list[str]:
    rng = random.Random(7)
    paths = []
    for i in range(RECORDS):
        text = " ".join(str(rng.randrange(256)) for _ in range(3 * SIDE * SIDE))
        path = os.path.join(folder, f"rec_{i:05d}.z")
        with open(path, "wb") as f:
            f.write(zlib.compress(text.encode(), 6))
        paths.append(path)
    return paths


class TextPixels(Dataset):
    def __init__(self, paths: list[str], length: int) -> None:
        self.paths, self.length = paths, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> torch.Tensor:
        with open(self.paths[i % len(self.paths)], "rb") as f:
            values = [int(v) for v in zlib.decompress(f.read()).split()]
        img = torch.tensor(values, dtype=torch.float32).view(3, SIDE, SIDE)
        return (img / 127.5 - 1.0)


class ResBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(c, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)
        self.b1, self.b2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


def main() -> None:
    a = options(__doc__.splitlines()[0])
    folder = tempfile.mkdtemp(prefix="records_")
    try:
        paths = write_shard(folder)
        model = nn.Sequential(nn.Conv2d(3, 16, 4, stride=4), ResBlock(16),
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).to(a.device).eval()
        loader = DataLoader(TextPixels(paths, 10**7), batch_size=BATCH, num_workers=2,
                            pin_memory=a.device == "cuda", persistent_workers=False)
        stop = StopFlag(a.seconds)
        n = 0
        with torch.inference_mode():
            for batch in loader:
                model(batch.to(a.device, non_blocking=True)).argmax(1).cpu()
                n += batch.shape[0]
                if stop:
                    break
        report("record_loader", n, "records", stop.elapsed(), a.device, "2 loader workers")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
