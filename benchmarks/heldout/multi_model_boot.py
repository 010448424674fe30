"""A batch job that loads a three-model pipeline, warms it up, scores a little and exits.

Text encoder (embedding + transformer), image backbone (conv stack) and a
fusion ranker, each saved as its own checkpoint. Checkpoints cannot be
downloaded, so the job first writes them to a temp directory, then does what
the real job does: build each model, torch.load its weights (the encoder
memory-mapped), move it to the device, warm it up with dummy inputs of every
expected shape, then scores 6 small batches and exits (--seconds only caps it).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import torch
from _cli import StopFlag, options, report
from torch import nn

VOCAB, WIDTH, TEXT_LEN, SIDE = 50_000, 512, 64, 96


def text_encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 8, 4 * WIDTH, batch_first=True)
    return nn.ModuleDict({"embed": nn.Embedding(VOCAB, WIDTH),
                          "body": nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)})


def image_backbone() -> nn.Module:
    layers, c = [], 3
    for out in (64, 128, 256, 512):
        layers += [nn.Conv2d(c, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU(), nn.MaxPool2d(2)]
        c = out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, WIDTH))


def ranker() -> nn.Module:
    return nn.Sequential(nn.Linear(2 * WIDTH, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1))


class Pipeline(nn.Module):
    def __init__(self, enc: nn.Module, img: nn.Module, rank: nn.Module) -> None:
        super().__init__()
        self.enc, self.img, self.rank = enc, img, rank

    def forward(self, ids: torch.Tensor, pixels: torch.Tensor) -> torch.Tensor:
        t = self.enc["body"](self.enc["embed"](ids)).mean(1)
        return self.rank(torch.cat([t, self.img(pixels)], dim=1)).squeeze(1)


def main() -> None:
    a = options(__doc__.splitlines()[0], seconds=60)
    folder = tempfile.mkdtemp(prefix="ckpt_")
    try:
        builders = {"text": text_encoder, "image": image_backbone, "rank": ranker}
        for name, build in builders.items():  # stand-in for the model registry
            torch.save(build().state_dict(), os.path.join(folder, f"{name}.pt"))
        parts = {}
        for name, build in builders.items():
            m = build()
            state = torch.load(os.path.join(folder, f"{name}.pt"), map_location="cpu",
                               weights_only=True, mmap=name == "text")
            m.load_state_dict(state)
            parts[name] = m.to(a.device).eval()
        pipe = Pipeline(parts["text"], parts["image"], parts["rank"])
        if a.device == "cuda":
            torch.backends.cudnn.benchmark = True
        stop = StopFlag(a.seconds)
        with torch.inference_mode():
            for b in (1, 2, 4, 8, 16):  # warm up every batch size the job may see
                pipe(torch.zeros(b, TEXT_LEN, dtype=torch.long, device=a.device),
                     torch.zeros(b, 3, SIDE, SIDE, device=a.device))
            n = 0
            for _ in range(6):
                if stop:
                    break
                ids = torch.randint(0, VOCAB, (4, TEXT_LEN), device=a.device)
                scores = pipe(ids, torch.rand(4, 3, SIDE, SIDE, device=a.device))
                scores.cpu()
                n += 4
        report("multi_model_boot", n, "items", stop.elapsed(), a.device, "3 models loaded")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
