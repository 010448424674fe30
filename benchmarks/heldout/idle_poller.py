"""A sensor-anomaly scorer that wakes up a few times a second.

Every ~0.4 s it takes the latest window of 8 sensor channels x 256 samples,
runs a small 1-D conv net on it and goes back to sleep. The device and the
CPU are idle nearly all the time: the program has no bottleneck to speak of.
"""

from __future__ import annotations

import math
import random

import torch
from _cli import StopFlag, options, report
from torch import nn

PERIOD, CHANNELS, SAMPLES = 0.4, 8, 256


def main() -> None:
    a = options(__doc__.splitlines()[0])
    model = nn.Sequential(nn.Conv1d(CHANNELS, 32, 7, padding=3), nn.ReLU(), nn.Conv1d(32, 32, 5, padding=2),
                          nn.ReLU(), nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(32, 1)).to(a.device).eval()
    rng = random.Random(5)
    stop = StopFlag(a.seconds)
    polls = alerts = 0
    phase = 0.0
    with torch.inference_mode():
        while not stop:
            window = [[math.sin(phase + j * 0.05 + c) + rng.gauss(0, 0.1) for j in range(SAMPLES)]
                      for c in range(CHANNELS)]
            phase += 0.3
            x = torch.tensor(window).unsqueeze(0).to(a.device)
            alerts += float(torch.sigmoid(model(x))) > 0.9
            polls += 1
            stop.sleep(PERIOD * rng.uniform(0.9, 1.1))
    report("idle_poller", polls, "polls", stop.elapsed(), a.device, f"{alerts} alerts")


if __name__ == "__main__":
    main()
