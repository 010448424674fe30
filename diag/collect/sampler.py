"""The interface every out-of-process sampler offers to the launcher.

Samplers run inside the diag process (threads or subprocesses), beside the
target, never inside it. Each writes its rows under the run directory and
reports one status dict for run.json's `collectors` block.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

OK = "ok"
UNAVAILABLE = "unavailable"
OFF = "off"
FAILED = "failed"


@runtime_checkable
class Sampler(Protocol):
    """What the launcher needs from a sampler."""

    name: str  # the key in run.json collectors: "host", "gpu", "stacks"

    def start(self, run_dir: str, root_pid: int) -> None:
        """Begin sampling the process tree under root_pid. Never raises."""
        ...

    def stop(self) -> None:
        """Stop and flush everything to disk. Never raises; safe to call twice."""
        ...

    def status(self) -> dict[str, Any]:
        """{"status": "ok"|"unavailable"|"off"|"failed", "reason": str?, ...extra}."""
        ...


class PeriodicThread:
    """Calls `tick()` every `interval_s` on a daemon thread until stopped.

    Deadlines are kept on a fixed grid so the rate does not drift with the
    cost of a tick; a tick that overruns skips the deadlines it missed.
    `tick` must not raise; if it does, `on_error` gets the exception and the
    loop ends (the sampler then reports `failed`).
    """

    def __init__(self, name: str, interval_s: float, tick: Callable[[], None],
                 on_error: Callable[[BaseException], None]) -> None:
        self._interval = max(interval_s, 0.001)
        self._tick = tick
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"diag-{name}", daemon=True)
        self.cpu_s = 0.0  # CPU seconds this thread has used: the sampler's own overhead
        self.ticks = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                self._tick()
            except BaseException as e:  # noqa: BLE001 - a sampler bug must not escape its thread
                self._on_error(e)
                return
            finally:
                self.cpu_s = time.thread_time()
            self.ticks += 1
            next_t += self._interval
            now = time.monotonic()
            if next_t < now:  # overran: start a fresh grid rather than tick back to back
                next_t = now + self._interval
            self._stop.wait(next_t - now)
