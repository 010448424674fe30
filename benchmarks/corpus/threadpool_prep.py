"""Feature extraction in a thread pool: the stepping thread waits on futures while pool threads run Python.

Each batch's 32 items are featurized by 2 pool threads (pure-Python n-gram
hashing of a text); the main thread waits for the futures, then a small MLP
scores the batch. The GIL makes the pool no faster than one core.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

TEXT = ("the quick brown fox jumps over the lazy dog while the model waits for its features " * 12).split()


def featurize(seed: int) -> list[float]:
    vec = [0.0] * 512
    words = TEXT[seed % 7:] + TEXT[: seed % 7]
    for i in range(len(words) - 2):
        gram = words[i] + " " + words[i + 1] + " " + words[i + 2]
        h = 0
        for ch in gram:
            h = (h * 131 + ord(ch)) & 0xFFFFFFFF
        vec[h % 512] += 1.0
    return vec


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0])
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 8)).to(a.device).eval()
    pool = ThreadPoolExecutor(2, thread_name_prefix="featurize")
    stop = Stop(a.seconds)
    n = 0
    with torch.inference_mode():
        while not stop:
            feats = [f.result() for f in [pool.submit(featurize, n + k) for k in range(32)]]
            model(torch.tensor(feats, device=a.device)).argmax(-1).cpu()
            n += 32
    pool.shutdown()
    report("threadpool_prep", n, "items", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
