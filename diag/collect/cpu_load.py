"""Has the host a core to spare? The one signal diag's samplers slow down on.

On a small host whose cores the target fills, every CPU second diag spends
(py-spy's samples, psutil's reads, a sampler thread waking up) comes out of
the target, and a target whose threads run in parallel bursts (torch
intra-op threads) loses more than that: the others wait for the thread diag
preempted. So on a host of at most SMALL_HOST_CORES cores, the samplers
that can run less often do (py-spy at a lower rate, psutil at a longer
interval) while fewer than SATURATED_SPARE_CORES cores are idle, and go
back once FREE_SPARE_CORES are idle again (hysteresis: no flapping between
the two thresholds). A bigger host has a core for diag: nothing changes.

The idle CPU is judged over SPARE_WINDOW_S, short, so a saturated run slows
its samplers within its first seconds rather than after most of a short run.
"""

from __future__ import annotations

from collections import deque

import psutil

SMALL_HOST_CORES = 4  # above this, diag's share of one core is not taken from the target
SATURATED_SPARE_CORES = 0.3  # idle cores below this: saturated
FREE_SPARE_CORES = 0.75  # idle cores at or above this: a core to spare again
SPARE_WINDOW_S = 1.0  # idle CPU is judged over this long


def saturated(cores: int, spare_cores: float, was_saturated: bool) -> bool:
    """Whether a host of `cores` with `spare_cores` idle counts as saturated now (with hysteresis)."""
    if cores > SMALL_HOST_CORES:
        return False
    if spare_cores < SATURATED_SPARE_CORES:
        return True
    if spare_cores >= FREE_SPARE_CORES:
        return False
    return was_saturated


class IdleCpu:
    """The machine's idle cores over a sliding window, from /proc/stat deltas (psutil.cpu_times)."""

    def __init__(self, window_s: float = SPARE_WINDOW_S, cores: int | None = None) -> None:
        self.window_s = window_s
        self.cores = cores or psutil.cpu_count() or 1
        self._marks: deque[tuple[float, float, float]] = deque()  # (time, idle s, total s), all cores

    def add(self, now: float, idle_s: float, total_s: float) -> None:
        """A reading of the cumulative idle and total CPU seconds at `now`."""
        self._marks.append((now, idle_s, total_s))
        while len(self._marks) > 2 and now - self._marks[1][0] >= self.window_s:
            self._marks.popleft()

    def read(self, now: float) -> None:
        t = psutil.cpu_times()
        self.add(now, idle_seconds(t), sum(t))

    def spare_cores(self) -> float | None:
        """Idle cores over the window, None until the window is full."""
        if len(self._marks) < 2:
            return None
        (t0, i0, s0), (t1, i1, s1) = self._marks[0], self._marks[-1]
        if t1 - t0 < self.window_s or s1 <= s0:
            return None
        return self.cores * (i1 - i0) / (s1 - s0)


def idle_seconds(times: object) -> float:
    """Idle CPU seconds of a psutil.cpu_times() reading (I/O wait is idle: a core free to run diag)."""
    return getattr(times, "idle", 0.0) + getattr(times, "iowait", 0.0)
