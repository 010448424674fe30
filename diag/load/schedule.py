"""When each request of an open loop is due: Poisson or constant arrivals.

Times are offsets in seconds from the start of the load. The client sends each
request at its offset whatever happened to the earlier ones (open loop), and
latency is measured from the offset, so a slow server cannot hide its queue
(no coordinated omission).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

ARRIVALS = ("poisson", "constant")


def arrival_offsets(rate: float, seconds: float, arrivals: str = "poisson", seed: int | None = 0) -> Iterator[float]:
    """Offsets (s) of the requests sent at `rate` per second for `seconds`, in order."""
    if rate <= 0:
        return
    if arrivals == "constant":
        n = int(rate * seconds)
        for i in range(n):
            yield i / rate
        return
    rng = random.Random(seed)
    t = rng.expovariate(rate)  # Poisson process: exponential gaps with mean 1/rate
    while t < seconds:
        yield t
        t += rng.expovariate(rate)
