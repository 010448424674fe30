"""Kernel windows: a few short torch.profiler (CUPTI) captures of a few steps each.

Recording side: standard library and torch only (never pandas or pyarrow).

What it does, per process, driven by the recorder's `on_step_end(seq)` calls:

1. **Profiler init, once, early.** The first torch.profiler start with CUDA
   activities costs seconds (CUPTI init: 4-7 s measured on an H200). Paying it
   at the first window would stall the steady state unannounced, and paying
   it in another thread is worse (it ran 7 s there and slowed the stepping
   thread 18x: benchmarks/profiler_init_probe.py). So a throwaway profiler is
   started and stopped once, on the program's own thread, as soon as the
   program has set itself up on the GPU: right after its first
   `Module.to(cuda)` / `Module.cuda()` (model set-up, before any request), or
   else at the end of its first step. That time is written as an `events` row
   (kind `window`, name `profiler_init`, `dur_ns` = its cost). Nothing runs
   before the program has initialised CUDA itself
   (`torch.cuda.is_initialized()`), so diag never creates a CUDA context for a
   program that does not use one.
2. **Windows.** After warm-up (step >= `kernel_window_after_steps` and
   >= `kernel_window_after_s` seconds since this module was installed),
   `kernel_windows` windows of `kernel_window_steps` steps each, at least
   `kernel_window_spacing_s` seconds and `kernel_window_spacing_steps` steps
   apart. A window opens at the end of one step and closes at the end of the
   N-th step after it, so the steps inside are whole; `recorder.in_window` is
   True meanwhile, so those steps are flagged. A window also closes after
   `kernel_window_max_s` seconds, and at process exit.
3. **Accounting.** Every interval diag spends in the profiler is written as an
   `events` row of kind `window` (`profiler_init`, `start`, `stop`: stop
   includes exporting the trace), so analysis subtracts all `window` events'
   `dur_ns` from the program's time. The `windows` row carries
   `profiler_start_ns` (start cost) and `profiler_stop_ns` (stop + export).
   Each trace goes to `RUN/raw/kineto/window<N>.<pid>.json`.

Never hurt the target: any profiler error writes a `note` event (name
`kernel_windows`, `detail.reason`) and stops all further windows.
`WindowScheduler` is the pure decision logic (fake clock in tests);
`KernelWindows` does the torch side.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diag.collect.options import defaults

# the kernel-window options and their defaults (the option table owns them)
DEFAULTS: dict[str, float] = {k: v for k, v in defaults("target").items() if k.startswith("kernel_window")}

INIT, START, STOP = "init", "start", "stop"


@dataclass
class WindowScheduler:
    """Decides, at each step end, whether to init the profiler, open or close a window.

    `now` is seconds on any monotonic clock; `installed_at` is on the same clock.
    The caller reports what it did through `done()` / `failed()`.
    """

    installed_at: float
    windows: int = int(DEFAULTS["kernel_windows"])
    steps: int = int(DEFAULTS["kernel_window_steps"])
    after_steps: int = int(DEFAULTS["kernel_window_after_steps"])
    after_s: float = DEFAULTS["kernel_window_after_s"]
    spacing_steps: int = int(DEFAULTS["kernel_window_spacing_steps"])
    spacing_s: float = DEFAULTS["kernel_window_spacing_s"]
    max_s: float = DEFAULTS["kernel_window_max_s"]
    initialised: bool = False
    open: bool = False
    opened: int = 0          # windows opened so far
    in_window: int = 0       # steps ended inside the open window
    opened_at: float = 0.0
    last_close_seq: int | None = None
    last_close_at: float = 0.0
    stopped: bool = False

    @classmethod
    def from_options(cls, options: dict[str, Any], installed_at: float) -> WindowScheduler:
        o = {k: options.get(k, v) for k, v in DEFAULTS.items()}
        return cls(installed_at=installed_at, windows=int(o["kernel_windows"]),
                   steps=max(1, int(o["kernel_window_steps"])),
                   after_steps=int(o["kernel_window_after_steps"]), after_s=float(o["kernel_window_after_s"]),
                   spacing_steps=int(o["kernel_window_spacing_steps"]),
                   spacing_s=float(o["kernel_window_spacing_s"]), max_s=float(o["kernel_window_max_s"]))

    @property
    def finished(self) -> bool:
        return self.stopped or (self.opened >= self.windows and not self.open)

    def decide(self, seq: int, now: float) -> str | None:
        """What to do at the end of step `seq`: INIT, START, STOP or None."""
        if self.stopped or self.windows <= 0:
            return None
        if self.open:
            self.in_window += 1
            if self.in_window >= self.steps or now - self.opened_at >= self.max_s:
                return STOP
            return None
        if not self.initialised:
            return INIT
        if self.opened >= self.windows:
            return None
        if not self.warmed_up(seq, now):
            return None
        if self.last_close_seq is not None and (
            seq - self.last_close_seq < self.spacing_steps or now - self.last_close_at < self.spacing_s
        ):
            return None
        return START

    def warmed_up(self, seq: int, now: float) -> bool:
        """Warm-up is over: enough steps and enough seconds."""
        return seq >= self.after_steps and now - self.installed_at >= self.after_s

    def done(self, action: str, seq: int, now: float) -> None:
        """Record that `action` succeeded at the end of step `seq`."""
        if action == INIT:
            self.initialised = True
        elif action == START:
            self.open, self.opened, self.in_window, self.opened_at = True, self.opened + 1, 0, now
        elif action == STOP:
            self.open, self.last_close_seq, self.last_close_at = False, seq, now

    def failed(self) -> None:
        """A profiler call failed: no more windows."""
        self.stopped, self.open = True, False


def _cuda_profiler() -> Any:
    """A torch.profiler.profile recording CPU and CUDA activity (no shapes, no stacks: keep it light)."""
    import torch.profiler as tp

    return tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.CUDA],
                      record_shapes=False, with_stack=False, profile_memory=False)


def cuda_in_use() -> bool:
    """True when the program itself has initialised CUDA (never initialises it)."""
    import torch

    return bool(torch.cuda.is_initialized())


def profiler_in_use() -> bool:
    """True when a profiler is already on (the program's own): then diag stays out of its way."""
    import torch

    return bool(torch.autograd._profiler_enabled())


def cuda_built() -> str | None:
    """None when this torch can drive CUDA, else why not."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is a reason, not a crash
        return f"torch import failed: {exc.__class__.__name__}"
    if not getattr(torch.version, "cuda", None):
        return "torch built without CUDA"
    return None


class KernelWindows:
    """Runs the windows for one process; attach with `install(recorder)`."""

    def __init__(self, recorder: Any, scheduler: WindowScheduler,
                 make_profiler: Callable[[], Any] = _cuda_profiler,
                 cuda_ready: Callable[[], bool] = cuda_in_use,
                 profiler_busy: Callable[[], bool] = profiler_in_use,
                 clock: Callable[[], float] = time.monotonic,
                 wall_ns: Callable[[], int] = time.time_ns) -> None:
        self.recorder = recorder
        self.scheduler = scheduler
        self.make_profiler = make_profiler
        self.cuda_ready = cuda_ready
        self.profiler_busy = profiler_busy
        self.clock = clock
        self.wall_ns = wall_ns
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._prof: Any = None
        self._window_ts_ns = 0
        self._start_cost_ns = 0
        self._first_seq = 0

    # -- writing rows through the recorder (diag/collect/recorder.py) ----------------------
    def _write(self, table: str, row: dict[str, Any]) -> None:
        try:
            self.recorder.write(table, row)
        except Exception:  # noqa: BLE001 - losing a row must never hurt the target
            pass

    def _event(self, name: str, ts_ns: int, dur_ns: int, **detail: Any) -> None:
        try:
            self.recorder.event("window", name, ts_ns=ts_ns, dur_ns=dur_ns, **detail)
        except Exception:  # noqa: BLE001
            pass

    def note(self, reason: str) -> None:
        """Say why windows stopped (or never ran), as an `events` note named `kernel_windows`."""
        try:
            self.recorder.note("kernel_windows", reason)
        except Exception:  # noqa: BLE001
            pass

    def _set_in_window(self, value: bool) -> None:
        try:
            self.recorder.in_window = value
        except Exception:  # noqa: BLE001
            pass

    # -- the step-end callback ----------------------------------------------------------
    def on_step_end(self, seq: int) -> None:
        """Called by the recorder after each outermost step; never raises."""
        if self.scheduler.finished or not self._lock.acquire(blocking=False):
            return
        try:
            now = self.clock()
            action = self.scheduler.decide(seq, now)
            if action is None:
                return
            if action in (INIT, START) and not self.cuda_ready():
                if self.scheduler.warmed_up(seq, now):
                    # Warm-up is over and the program still has not touched CUDA: a CPU run.
                    self.scheduler.failed()
                    self.note("CUDA not initialised by the program: no kernel windows")
                return
            if action in (INIT, START) and self.profiler_busy():
                self._abandon("the program runs its own profiler: no kernel windows")
                return
            getattr(self, f"_{action}")(seq)
            self.scheduler.done(action, seq, self.clock())
        except Exception as exc:  # noqa: BLE001 - a profiler failure must never reach the target
            self._abandon(f"torch.profiler {action} failed: {exc.__class__.__name__}: {exc}"[:300])
        finally:
            if self.scheduler.finished:
                self._detach()
            self._lock.release()

    def _detach(self) -> None:
        """All windows done (or abandoned): stop being called after every step."""
        try:
            self.recorder.on_step_end.remove(self.on_step_end)
        except (ValueError, AttributeError):
            pass

    def init_early(self) -> None:
        """Pay the profiler's one-time init now, during the program's set-up. Never raises."""
        if self.scheduler.initialised or self.scheduler.finished or not self._lock.acquire(blocking=False):
            return
        try:
            if self.scheduler.initialised or not self.cuda_ready():
                return
            if self.profiler_busy():
                self._abandon("the program runs its own profiler: no kernel windows")
                return
            self._init(-1)
            self.scheduler.done(INIT, -1, self.clock())
        except Exception as exc:  # noqa: BLE001 - a profiler failure must never reach the target
            self._abandon(f"torch.profiler init failed: {exc.__class__.__name__}: {exc}"[:300])
        finally:
            self._lock.release()

    def _init(self, seq: int) -> None:
        ts, t0 = self.wall_ns(), time.perf_counter_ns()
        prof = self.make_profiler()
        prof.start()
        prof.stop()
        self._event("profiler_init", ts, time.perf_counter_ns() - t0, seq=seq)

    def _start(self, seq: int) -> None:
        ts, t0 = self.wall_ns(), time.perf_counter_ns()
        self._prof = self.make_profiler()
        self._prof.start()
        self._start_cost_ns = time.perf_counter_ns() - t0
        self._event("start", ts, self._start_cost_ns, window=self.scheduler.opened, seq=seq)
        self._window_ts_ns = ts + self._start_cost_ns
        self._first_seq = seq + 1
        self._set_in_window(True)

    def _stop(self, seq: int) -> None:
        window = self.scheduler.opened - 1
        stop_ts, t0 = self.wall_ns(), time.perf_counter_ns()
        self._set_in_window(False)
        prof, self._prof = self._prof, None
        prof.stop()
        name = f"window{window}.{self.pid}.json"
        out_dir = os.path.join(str(self.recorder.run_dir), "raw", "kineto")
        os.makedirs(out_dir, exist_ok=True)
        prof.export_chrome_trace(os.path.join(out_dir, name))
        stop_cost = time.perf_counter_ns() - t0
        self._event("stop", stop_ts, stop_cost, window=window, seq=seq)
        self._write("windows", {"window": window, "ts_ns": self._window_ts_ns,
                                "dur_ns": max(0, stop_ts - self._window_ts_ns),
                                "steps": seq - self._first_seq + 1, "first_seq": self._first_seq,
                                "profiler_start_ns": self._start_cost_ns, "profiler_stop_ns": stop_cost,
                                "trace": name})

    def _abandon(self, reason: str) -> None:
        self.scheduler.failed()
        self._set_in_window(False)
        prof, self._prof = self._prof, None
        if prof is not None:
            try:
                prof.stop()
            except Exception:  # noqa: BLE001
                pass
        self.note(reason)

    def close(self) -> None:
        """At exit: close an open window so its trace is kept."""
        if not self._lock.acquire(timeout=1.0):
            return  # a step thread is inside the profiler: leave it
        try:
            if self.scheduler.open and self._prof is not None:
                try:
                    seq = self._first_seq + self.scheduler.in_window - 1
                    self._stop(seq)
                    self.scheduler.done(STOP, seq, self.clock())
                except Exception as exc:  # noqa: BLE001
                    self._abandon(f"torch.profiler stop at exit failed: {exc.__class__.__name__}")
        finally:
            self._lock.release()


def _init_after_model_moves_to_gpu(kw: KernelWindows) -> None:
    """Wrap Module.to / Module.cuda until the first call that leaves CUDA initialised.

    The wrappers remove themselves then, so the program pays nothing later.
    """
    import torch

    module = torch.nn.Module
    originals = {name: getattr(module, name) for name in ("to", "cuda")}

    def restore() -> None:
        for name, fn in originals.items():
            setattr(module, name, fn)

    def wrap(name: str) -> Callable[..., Any]:
        original = originals[name]

        def moved(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, *args, **kwargs)
            if kw.scheduler.initialised or kw.scheduler.finished:
                restore()
            elif kw.cuda_ready():
                restore()
                kw.init_early()
            return out

        moved.__wrapped__ = original  # type: ignore[attr-defined]
        return moved

    for name in originals:
        setattr(module, name, wrap(name))


def install(recorder: Any) -> KernelWindows | None:
    """Attach kernel windows to the recorder, or note why not. Never raises."""
    try:
        options = dict(getattr(recorder, "options", None) or {})
        scheduler = WindowScheduler.from_options(options, installed_at=time.monotonic())
        kw = KernelWindows(recorder, scheduler)
        if scheduler.windows <= 0:
            kw.note("kernel windows turned off (kernel_windows=0)")
            return None
        why_not = cuda_built()
        if why_not:
            kw.note(why_not)
            return None
        recorder.on_step_end.append(kw.on_step_end)
        _init_after_model_moves_to_gpu(kw)
        hooks = getattr(recorder, "flush_hooks", None)
        if isinstance(hooks, list):
            # Called with final=True by the recorder's exit path (atexit and SIGTERM).
            hooks.append(lambda final: kw.close() if final else None)
        else:
            atexit.register(kw.close)
        return kw
    except Exception:  # noqa: BLE001 - never hurt the target
        return None
