"""The model every serving benchmark runs: a small TransformerEncoder text classifier (CPU-sized)."""

from __future__ import annotations

import time

import torch

SEQ = 64
VOCAB = 4096


def make_model(size: str = "small") -> torch.nn.Module:
    """A TransformerEncoder classifier (mean-pool head), eval mode.

    small: 2 layers, d_model 128 (~6 ms batch 1, ~30 ms batch 16 on one core);
    large: 4 layers, d_model 256 (~50 ms / ~400 ms): about 30 requests/s batched, the overloaded variant.
    """
    torch.manual_seed(0)
    d, layers = (256, 4) if size == "large" else (128, 2)

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(VOCAB, d)
            layer = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(d, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(ids)).mean(dim=1))

    return Classifier().eval()


class Paced(torch.nn.Module):
    """`inner`, padded with a sleep to at least `ms` per call: a service time a busy shared box does not blur.

    The sleep releases the GIL, as a GPU model's wait for its kernels does.
    """

    def __init__(self, inner: torch.nn.Module, ms: float) -> None:
        super().__init__()
        self.inner = inner
        self.ms = ms

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        out = self.inner(ids)
        time.sleep(max(0.0, self.ms / 1e3 - (time.perf_counter() - t0)))
        return out


def tokenize(text: str, heavy_ms: float = 0.0) -> list[int]:
    """Hash words to ids; with `heavy_ms`, a pure-Python normalisation pass that costs about that long."""
    if heavy_ms > 0:
        text = normalise(text, heavy_ms)
    ids = [hash(w) % VOCAB for w in text.split()][:SEQ]
    return ids + [0] * (SEQ - len(ids))


def normalise(text: str, ms: float) -> str:
    """Character-level Python work (the slow tokenizer of a real server) for about `ms` of wall time."""
    deadline = time.perf_counter() + ms / 1e3
    acc, i = 0, 0
    while True:
        for _ in range(200):  # pure Python, holding the GIL
            acc = (acc * 31 + ord(text[i % len(text)])) % 1_000_003
            i += 1
        if time.perf_counter() >= deadline:
            return text + ("" if acc >= 0 else "x")
