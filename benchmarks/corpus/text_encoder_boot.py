"""Text-encoder server start-up: trace + freeze, compressed engine cache, bucket warm-up, short burst.

Start-up does what such servers do before taking traffic: build the encoder,
compile it with TorchScript (trace, freeze), write the compiled engine to a
compressed on-disk cache, load it back from there, and warm up every
(batch, length) bucket it serves. Then it answers a short burst of batches.
"""

from __future__ import annotations

import io
import os
import tempfile
import zlib


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0], seconds=2.0)
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0)
    enc = nn.Sequential(nn.Embedding(8000, 256), nn.TransformerEncoder(layer, 3, enable_nested_tensor=False))
    enc = enc.to(a.device).eval()
    buckets = [(b, n) for b in (1, 4) for n in (16, 32, 64)]
    cache = tempfile.mkdtemp(prefix="encoder-cache-")
    engines = {}
    with torch.no_grad():  # TorchScript: inference_mode defeats the profiling executor
        for b, n in buckets:
            x = torch.randint(0, 8000, (b, n), device=a.device)
            traced = torch.jit.freeze(torch.jit.trace(enc, x, check_trace=False))
            buf = io.BytesIO()
            torch.jit.save(traced, buf)
            path = os.path.join(cache, f"enc_b{b}_n{n}.pt.z")
            with open(path, "wb") as f:
                f.write(zlib.compress(buf.getvalue(), 6))
            with open(path, "rb") as f:
                engines[b, n] = torch.jit.load(io.BytesIO(zlib.decompress(f.read())), map_location=a.device)
            for _ in range(3):  # warm-up: the profiling executor specializes on the first calls
                engines[b, n](x)
        stop = Stop(a.seconds)
        done = 0
        while not stop:
            b, n = buckets[done % len(buckets)]
            engines[b, n](torch.randint(0, 8000, (b, n), device=a.device)).mean(1).cpu()
            done += 1
    report("text_encoder_boot", done, "batches", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
