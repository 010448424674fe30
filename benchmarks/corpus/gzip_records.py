"""Scoring records streamed out of a gzip archive held in memory: decompression through file-object reads.

The archive is built at start and kept as bytes (as a blob-store download
gives it). Each batch reads 64 records of 4 KiB through gzip.GzipFile.read,
which decompresses on the calling thread, and a small MLP scores them.
"""

from __future__ import annotations

import gzip
import io


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0])
    import numpy as np
    import torch
    from torch import nn

    rng = np.random.default_rng(0)
    raw = rng.integers(0, 16, 4096 * 4096, dtype=np.uint8).tobytes()  # 16 MiB of records, compressible
    blob = gzip.compress(raw, compresslevel=6)
    model = nn.Sequential(nn.Linear(4096, 8)).to(a.device).eval()
    stop = Stop(a.seconds)
    n = 0
    f = gzip.GzipFile(fileobj=io.BytesIO(blob))
    with torch.inference_mode():
        while not stop:
            chunk = f.read(64 * 4096)
            if len(chunk) < 64 * 4096:
                f = gzip.GzipFile(fileobj=io.BytesIO(blob))
                continue
            x = torch.frombuffer(bytearray(chunk), dtype=torch.uint8).view(64, 4096).float().to(a.device)
            model(x).argmax(-1).cpu()
            n += 64
    report("gzip_records", n, "records", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
