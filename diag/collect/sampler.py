"""The interface every out-of-process sampler offers to the launcher, and its base classes.

Samplers run inside the diag process (threads or subprocesses), beside the
target, never inside it. Each writes its rows under the run directory and
reports one status dict for run.json's `collectors` block.

`SamplerBase` writes the parts every sampler shares once: start and stop that
never raise (an error becomes status `failed`, an `Unavailable` raised while
starting becomes `unavailable`), and the status dict with the sampler's own
CPU seconds. `PeriodicSampler` adds a sampling thread and one JSON-lines
writer per table; a new sampler fills in `tables`, `open()`, `tick()` and,
if it holds resources, `close()`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from diag.store.jsonl import JsonlWriter

OK = "ok"
UNAVAILABLE = "unavailable"
OFF = "off"
FAILED = "failed"


def idle_priority() -> bool:
    """Move the calling thread, and the threads and processes it starts later, to SCHED_IDLE.

    A target that fills every core with intra-op threads waits at each parallel
    region for its slowest thread, so a sampler that preempts one of them can
    stall them all. At idle priority a sampler runs only on a core the target
    leaves idle and never preempts it; on a host with no idle core it samples
    less often (every row keeps its own time). Opt-in (`--idle-priority`): on
    the 2-core box it showed no gain within the noise and halved the host
    samples of a target that filled both cores (docs/performance.md).
    False where the system has no SCHED_IDLE or refuses it. Never raises.
    """
    policy = getattr(os, "SCHED_IDLE", None)
    if policy is None:
        return False
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))  # Linux: 0 is the calling thread
    except (OSError, AttributeError):
        return False
    return True


@runtime_checkable
class Sampler(Protocol):
    """What the launcher needs from a sampler."""

    name: str  # the key in run.json collectors: "host", "gpu", "stacks"
    idle: bool  # sample at idle CPU priority (idle_priority)

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
                 on_error: Callable[[BaseException], None], idle: bool = False) -> None:
        self.interval_s = max(interval_s, 0.001)  # read at every tick: `tick` may change it
        self._idle = idle  # run at idle CPU priority (idle_priority)
        self.priority = "normal"  # what the thread got: "idle" once idle_priority() succeeded
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
        if self._idle and idle_priority():
            self.priority = "idle"
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
            next_t += self.interval_s
            now = time.monotonic()
            if next_t < now:  # overran: start a fresh grid rather than tick back to back
                next_t = now + self.interval_s
            self._stop.wait(next_t - now)


class Unavailable(Exception):  # noqa: N818 - a state, not a bug: the status says "unavailable"
    """Raised by a sampler's start-up when it cannot run here (no GPU, no py-spy...): the reason."""


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class SamplerBase:
    """Status, start/stop failure handling and CPU accounting, once for every sampler.

    Subclasses implement `_start()` (may raise `Unavailable(reason)`), `_stop()`,
    and optionally `own_cpu_s()` and `extra_status()`.
    """

    name = "sampler"
    idle = False  # sample at idle CPU priority (idle_priority); profile.py: --idle-priority

    def __init__(self) -> None:
        self._status: dict[str, Any] = {"status": OFF, "reason": "not started"}

    def start(self, run_dir: str, root_pid: int) -> None:
        """Begin sampling the process tree under root_pid. Never raises."""
        try:
            self._start(run_dir, root_pid)
        except Unavailable as e:
            self._status = {"status": UNAVAILABLE, "reason": str(e)}
            self._cleanup()
        except Exception as e:  # noqa: BLE001 - never raise into the launcher
            self._status = {"status": FAILED, "reason": _error(e)}
            self._cleanup()

    def stop(self) -> None:
        """Stop and flush everything to disk. Never raises; safe to call twice."""
        try:
            self._stop()
        except Exception as e:  # noqa: BLE001
            self._status = {"status": FAILED, "reason": f"stop: {_error(e)}"}

    def status(self) -> dict[str, Any]:
        """{"status": ..., "reason"?: ..., <the sampler's own figures>, "cpu_s"?: its own CPU seconds}."""
        st = dict(self._status)
        st.update(self.extra_status())
        cpu = self.own_cpu_s()
        if cpu is not None:
            st["cpu_s"] = round(cpu, 4)
        return st

    def failed(self, e: BaseException) -> None:
        """Record that sampling broke down (the target runs on)."""
        self._status = {"status": FAILED, "reason": _error(e)}

    def _cleanup(self) -> None:
        """After a failed start: release what was taken, without raising."""
        try:
            self._stop()
        except Exception:  # noqa: BLE001,S110 - the start error is the one worth reporting
            pass

    # -- filled in by a sampler ----------------------------------------------------

    def _start(self, run_dir: str, root_pid: int) -> None:
        raise NotImplementedError

    def _stop(self) -> None:
        raise NotImplementedError

    def own_cpu_s(self) -> float | None:
        """CPU seconds the sampler itself has used (its overhead), None if not measured."""
        return None

    def extra_status(self) -> dict[str, Any]:
        """Sampler-specific status fields."""
        return {}


class PeriodicSampler(SamplerBase):
    """A sampler that calls `tick()` every `interval_s` on its own thread and writes `tables`.

    Fill in `open(run_dir, root_pid)` (raise `Unavailable` when it cannot run;
    return extra fields for the `ok` status), `tick()` (write rows with
    `self.write(table, row)`), and `close()` to release resources.
    """

    tables: tuple[str, ...] = ()

    def __init__(self, interval_s: float) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._loop: PeriodicThread | None = None
        self._writers: dict[str, JsonlWriter] = {}

    def _start(self, run_dir: str, root_pid: int) -> None:
        extra = self.open(run_dir, root_pid)
        self._writers = {t: JsonlWriter(run_dir, t) for t in self.tables}
        self._status = {"status": OK, "interval_s": self.interval_s, **(extra or {})}
        self._loop = PeriodicThread(self.name, self.interval_s, self.tick, self.failed, idle=self.idle)
        self._loop.start()

    def _stop(self) -> None:
        try:
            if self._loop is not None:
                self._loop.stop()
            for w in self._writers.values():
                w.close()
        finally:
            self.close()

    def write(self, table: str, row: dict[str, Any]) -> None:
        self._writers[table].write(row)

    def set_interval(self, interval_s: float) -> None:
        """Tick every `interval_s` from the next tick on (call it from `tick`); status keeps the base interval."""
        if self._loop is not None:
            self._loop.interval_s = interval_s

    def own_cpu_s(self) -> float | None:
        return self._loop.cpu_s if self._loop is not None else None

    def status(self) -> dict[str, Any]:
        st = super().status()
        if self._loop is not None:
            st["samples"] = self._loop.ticks
            st["priority"] = self._loop.priority
        return st

    def open(self, run_dir: str, root_pid: int) -> dict[str, Any] | None:
        """Prepare to sample; raise Unavailable(reason) when this sampler cannot run here."""
        return None

    def tick(self) -> None:
        """Take one sample."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what `open` took. Called once sampling has stopped (also after a failed start)."""
