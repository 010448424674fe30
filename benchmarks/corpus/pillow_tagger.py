"""Photo tagging: JPEG decode with Pillow from in-memory bytes, resize, normalize, small CNN."""

from __future__ import annotations

import io


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0])
    import numpy as np
    import torch
    from PIL import Image
    from torch import nn

    rng = np.random.default_rng(0)
    photos = []
    for _ in range(16):  # camera-sized photos, kept as JPEG bytes (as an upload or a blob store gives them)
        base = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
        img = Image.fromarray(base).resize((960, 720), Image.BILINEAR)
        out = io.BytesIO()
        img.save(out, "JPEG", quality=90)
        photos.append(out.getvalue())
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
    ).to(a.device).eval()
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    stop = Stop(a.seconds)
    n = 0
    with torch.inference_mode():
        while not stop:
            batch = []
            for k in range(8):
                im = Image.open(io.BytesIO(photos[(n + k) % len(photos)])).convert("RGB")
                im = im.resize((128, 128), Image.BICUBIC)
                batch.append((np.asarray(im, np.float32) / 255 - mean) / std)
            x = torch.from_numpy(np.stack(batch)).permute(0, 3, 1, 2).to(a.device)
            model(x).softmax(-1).cpu()
            n += 8
    report("pillow_tagger", n, "photos", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
