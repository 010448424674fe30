"""Live video analytics: raw frames arrive on a pipe from a decoder process.

A child process stands in for a camera decoder (ffmpeg -f rawvideo style): it
writes 3x128x128 uint8 frames to its stdout at the camera's frame rate. The
parent reads whole frames from the pipe, stacks 4 of them and runs a small
CNN detector head on them.
"""

from __future__ import annotations

import subprocess
import sys

FPS, SIDE, GROUP = 20, 128, 4
FRAME = 3 * SIDE * SIDE

DECODER = f"""
import os, sys, time
frame = bytes(range(256)) * ({FRAME} // 256) + bytes({FRAME} % 256)
out, t = sys.stdout.buffer, time.monotonic()
try:
    while True:
        t += 1 / {FPS}
        time.sleep(max(0.0, t - time.monotonic()))
        out.write(frame); out.flush()
except (BrokenPipeError, KeyboardInterrupt):
    pass
"""


def main() -> None:
    from _cli import StopFlag, options, report

    a = options(__doc__.splitlines()[0])
    import torch
    from torch import nn

    model = nn.Sequential(
        nn.Conv2d(3, 16, 4, stride=4), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 8),
    ).to(a.device).eval()
    decoder = subprocess.Popen([sys.executable, "-c", DECODER], stdout=subprocess.PIPE, bufsize=0,
                               start_new_session=True)
    stop = StopFlag(a.seconds)
    frames = 0
    buf = bytearray(FRAME * GROUP)
    try:
        with torch.inference_mode():
            while not stop:
                view, got = memoryview(buf), 0
                while got < len(buf):
                    k = decoder.stdout.readinto(view[got:])
                    if not k:
                        raise SystemExit("decoder ended")
                    got += k
                x = torch.frombuffer(buf, dtype=torch.uint8).view(GROUP, 3, SIDE, SIDE)
                x = x.to(a.device).float().div_(255)
                model(x).softmax(-1).cpu()
                frames += GROUP
    finally:
        decoder.kill()
        decoder.wait()
    report("pipe_frames", frames, "frames", stop.elapsed(), a.device, f"camera at {FPS} fps")


if __name__ == "__main__":
    main()
