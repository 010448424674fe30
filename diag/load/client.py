"""The client loop: sends the requests of one load step and times each one.

Open loop: request i is due at its arrival offset and is sent then, whether or
not earlier ones have answered; its latency runs from that due time, so the
time a request waits for a free connection or a busy event loop counts (no
coordinated omission), and `sent_ns - ts_ns` is the generator's own send lag.
Closed loop: `concurrency` workers each send the next request when their last
one ends (due time = send time).

The HTTP client is diag's own lean HTTP/1.1 client (http1.py: httptools' parser, uvloop under it where
installed), chosen by measurement over aiohttp (docs/serving.md, "How close the client's figures are").
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from diag.load.http1 import HttpClient, HttpFailure
from diag.load.schedule import arrival_offsets
from diag.load.spec import LoadSpec, render_body

# Error kinds, in the order views list them.
ERROR_KINDS = ("connect_refused", "connect_error", "timeout", "disconnected", "redirect", "http_4xx",
               "http_5xx", "other")
CONNECT_ERRORS = ("connect_refused", "connect_error")
# Stop a step early when this many requests in a row could not even connect (server gone).
GIVE_UP_CONNECT = 50
# Open loop: the request's task yield-waits the last SPIN_NS before its due time (timer wake-ups
# are late), only when arrivals are at least SPIN_MIN_GAP_NS apart, so it costs at most ~15% of a core.
SPIN_NS = 1_500_000
SPIN_MIN_GAP_NS = 10_000_000
# The event loop: uvloop where it is installed (a fifth less CPU per request than asyncio's own and
# half the generator's own round trip at 250-3000/s: docs/performance.md), asyncio's otherwise
# (Windows, Python 3.10) or when this says "asyncio".
LOOP_ENV = "DIAG_LOAD_LOOP"


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """What makes the load's event loop (None: asyncio's default)."""
    if os.environ.get(LOOP_ENV, "").lower() == "asyncio" or not hasattr(asyncio, "Runner"):  # Runner: 3.11+
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """asyncio.run(main) on the loop loop_factory() picks (this thread's own loop, no global policy)."""
    factory = loop_factory()
    if factory is None:
        asyncio.run(main)
        return
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


@dataclass
class Progress:
    """Live counts of the step that runs, read by the progress line."""

    started: float = 0.0
    seconds: float = 0.0
    sent: int = 0
    done: int = 0
    errors: int = 0
    in_flight: int = 0
    connect_fail_streak: int = 0
    stopped: str = ""  # why the step ended early ("" if it did not)
    label: str = ""  # what runs now ("50/s", "step 3: 75/s")
    last_ms: list[float] = field(default_factory=list)  # latencies of the last few hundred replies


def classify(status: int, exc: BaseException | None) -> str | None:
    """The error kind of one request (None: a success)."""
    if exc is not None:
        if isinstance(exc, asyncio.TimeoutError):
            return "timeout"
        if isinstance(exc, HttpFailure):
            return exc.kind
        if isinstance(exc, OSError):
            return "disconnected"
        return "other"
    if 300 <= status < 400:
        return "redirect"
    if 400 <= status < 500:
        return "http_4xx"
    if status >= 500:
        return "http_5xx"
    return None


async def _sleep_until(t_ns: int) -> None:
    """Sleep until `t_ns` (perf_counter); always sleep, even when late, so replies are read while sends are behind."""
    await asyncio.sleep(max(0.0, (t_ns - time.perf_counter_ns()) / 1e9))


async def _spin_until(t_ns: int) -> None:
    """Yield to the loop until `t_ns`: on time to a few microseconds, replies still read meanwhile."""
    while time.perf_counter_ns() < t_ns:
        await asyncio.sleep(0)


class LoadClient:
    """One HTTP session for a whole load (all sweep steps): `async with LoadClient(spec) as c: await c.step(...)`."""

    def __init__(self, spec: LoadSpec, on_row: Callable[[dict[str, Any]], None]) -> None:
        self.spec = spec
        self.on_row = on_row
        self.progress = Progress()
        self._http: HttpClient | None = None
        self._n = 0  # requests sent so far, numbers the bodies
        # wall clock of the run for the stored rows, perf_counter for the timing itself
        self._wall0 = time.time_ns()
        self._perf0 = time.perf_counter_ns()

    async def __aenter__(self) -> LoadClient:
        s = self.spec
        self._http = HttpClient(s.url, s.method, s.headers, s.timeout, s.max_connections)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            self._http.close()

    def wall_ns(self, perf_ns: int) -> int:
        return self._wall0 + perf_ns - self._perf0

    async def _one(self, due_ns: int, phase: str, step: int, spin: bool = False) -> None:
        assert self._http is not None
        if spin:
            await _spin_until(due_ns)
        p = self.progress
        i = self._n
        self._n += 1
        body = render_body(self.spec.bodies, i)
        sent_ns = time.perf_counter_ns()
        status, nbytes, exc, end_ns = 0, 0, None, 0
        p.sent += 1
        p.in_flight += 1
        try:
            status, nbytes, end_ns = await self._http.request(body)  # end_ns: when the reply's last byte came in
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure is a counted kind, never raised
            exc = e
        end_ns = end_ns or time.perf_counter_ns()
        p.in_flight -= 1
        error = classify(status, exc)
        p.done += 1
        if error:
            p.errors += 1
        else:
            p.last_ms.append((end_ns - due_ns) / 1e6)
            if len(p.last_ms) > 512:
                del p.last_ms[:256]
        p.connect_fail_streak = p.connect_fail_streak + 1 if error in CONNECT_ERRORS else 0
        if p.connect_fail_streak >= GIVE_UP_CONNECT and not p.stopped:
            p.stopped = f"{GIVE_UP_CONNECT} requests in a row could not connect ({error.replace('_', ' ')})"
        self.on_row({"ts_ns": self.wall_ns(due_ns), "sent_ns": self.wall_ns(sent_ns), "end_ns": self.wall_ns(end_ns),
                     "latency_ms": (end_ns - due_ns) / 1e6, "status": status, "error": error, "bytes": nbytes,
                     "phase": phase, "step": step})

    async def step(self, *, rate: float | None = None, concurrency: int | None = None, seconds: float,
                   warmup: float, step: int = 0) -> None:
        """Run `warmup` + `seconds` of load; returns when every request of the step has ended."""
        p = self.progress
        p.started, p.seconds, p.stopped, p.connect_fail_streak = time.monotonic(), warmup + seconds, "", 0
        start = time.perf_counter_ns()
        if concurrency:
            await self._closed(start, concurrency, seconds, warmup, step)
        else:
            await self._open(start, rate or 1.0, seconds, warmup, step)

    async def _open(self, start: int, rate: float, seconds: float, warmup: float, step: int) -> None:
        tasks: set[asyncio.Task[None]] = set()
        last = start
        for off in arrival_offsets(rate, warmup + seconds, self.spec.arrivals, seed=step):
            if self.progress.stopped:
                break
            due = start + int(off * 1e9)
            # A send is late by the loop's timer (epoll waits in whole milliseconds) plus the wake-up, and a
            # late send is latency the server never caused. When arrivals are far enough apart that it costs
            # little CPU, wake SPIN_NS early and let the request's own task yield-wait the rest, so that it
            # sends the moment it is due, without a further hop through the loop to start a task.
            spin = due - last >= SPIN_MIN_GAP_NS
            last = due
            await _sleep_until(due - SPIN_NS if spin else due)
            t = asyncio.create_task(self._one(due, "warmup" if off < warmup else "measure", step, spin))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)

    async def _closed(self, start: int, concurrency: int, seconds: float, warmup: float, step: int) -> None:
        end = start + int((warmup + seconds) * 1e9)
        warm_end = start + int(warmup * 1e9)

        async def worker() -> None:
            while not self.progress.stopped:
                now = time.perf_counter_ns()
                if now >= end:
                    return
                await self._one(now, "warmup" if now < warm_end else "measure", step)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
