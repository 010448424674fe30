"""Kernel windows: a few short CUPTI captures of a few steps each.

Recording side: standard library and torch only (never pandas or pyarrow);
cupti-python is imported during the program's set-up (the early init below).

Two backends record a window (`kernel_backend` option, `--kernel-backend`):

- **cupti** (chosen by `auto` when cupti-python is installed,
  diag/collect/cupti_backend.py): the CUPTI Activity API driven directly,
  kernels, memcpy and memset only. Its early init only imports cupti-python
  (~0.2 s on the H200, during set-up); a window then starts in ~15 ms.
  `cupti.finalize()` after each window (teardown) leaves nothing subscribed.
- **torch** (the fallback): torch.profiler (Kineto). Its first start costs
  seconds (CUPTI init: 3.4-4.3 s measured on an H200). Paying it at the first
  window would stall the steady state unannounced, and paying it in another
  thread is worse (it slowed the stepping thread 18x:
  benchmarks/profiler_init_probe.py). So a throwaway profiler is started and
  stopped once, on the program's own thread, as soon as the program has set
  itself up on the GPU: right after its first `Module.to(cuda)` /
  `Module.cuda()`, or else at the end of its first step (`events` row kind
  `window`, name `profiler_init`). Nothing runs before the program has
  initialised CUDA itself (`torch.cuda.is_initialized()`). `TEARDOWN_CUPTI=1`
  is put in `os.environ` before every profiler stop (and left there: Kineto
  reads it again when it finalizes CUPTI and at the next start's lazy
  re-init), so Kineto tears CUPTI down after each window; a later window's
  start then costs ~10 ms.

**Teardown** (`teardown_choice`): a `TEARDOWN_CUPTI` that diag did not write
(the user's, or the program's: torch sets `0` with inductor CUDA graphs) is
respected by both backends (`1`: teardown, else none). Otherwise, with CUDA
graphs in use (`recorder.cuda_graphs` set by the graph hooks, inductor's
cudagraph trees imported, or a capture seen at a step end) and a CUDA runtime
older than 12.6, no teardown (pytorch#144455: teardown then re-init crashed
graph programs), and no further window once a teardown has happened. Else
teardown. The choice is an `events` row (kind `window`, name `backend`,
`dur_ns` 0, detail `backend`, `teardown`, `why`), written at install and
whenever it changes; `recorded_choice` turns the last one into run.json's
`collectors.kernels`.

Windows: after warm-up (step >= `kernel_window_after_steps` and >=
`kernel_window_after_s` seconds since this module was installed),
`kernel_windows` windows of `kernel_window_steps` steps each, at least
`kernel_window_spacing_s` seconds and `kernel_window_spacing_steps` steps
apart. A window opens at the end of one step and closes at the end of the
N-th step after it, so the steps inside are whole; `recorder.in_window` is
True meanwhile, so those steps are flagged. A window also closes after
`kernel_window_max_s` seconds, and at process exit. Nothing starts or stops
while the current stream is capturing a CUDA graph: that step end is skipped
and the next one tries again.

**Multi-rank jobs** (`WORLD_SIZE` > 1 in the environment, as torchrun sets it):
every rank must open and close its windows at the same step numbers, or one
rank pays the profiler's start/stop while the others wait for it in the next
collective, step after step. So there the schedule is by step number only:
`after_s`, `spacing_s` and `max_s` are dropped (`WindowScheduler.ranks`), and
the `window`/`schedule` event says so (run.json `collectors.kernels.schedule`).
A multi-rank job where CUPTI would not be torn down after each window (a
TEARDOWN_CUPTI=0, or CUDA graphs on a CUDA runtime older than 12.6) gets no
windows, with the reason in run.json: CUPTI left subscribed beside NCCL's
threads is the configuration a 2-rank H200 job hung in (issue 17).

Accounting: every interval diag spends in the profiler is an `events` row of
kind `window` (`profiler_init`, `start`, `stop`: stop includes writing the
trace), so analysis subtracts all `window` events' `dur_ns` from the
program's time. The `windows` row carries `profiler_start_ns` (start cost),
`profiler_stop_ns` (stop + export; the cupti backend writes its trace in a
thread of its own, joined at exit, so there it is the stop only) and `backend`. Each trace goes to
`RUN/raw/kineto/window<N>.<pid>.json` (Kineto's chrome-trace shape for both
backends: diag/store/kineto.py reads them).

Never hurt the target: any profiler error writes a `note` event (name
`kernel_windows`, `detail.reason`) and stops all further windows (in `auto`,
a cupti-python that fails to load falls back to torch.profiler instead).
`WindowScheduler` is the pure decision logic (fake clock in tests);
`KernelWindows` does the torch/CUPTI side.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .options import defaults

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
    ranks: int = 1           # world size: above 1, steps decide alone (no clock: ranks' clocks differ)

    @classmethod
    def from_options(cls, options: dict[str, Any], installed_at: float, ranks: int = 1) -> WindowScheduler:
        o = {k: options.get(k, v) for k, v in DEFAULTS.items()}
        return cls(installed_at=installed_at, windows=int(o["kernel_windows"]),
                   steps=max(1, int(o["kernel_window_steps"])),
                   after_steps=int(o["kernel_window_after_steps"]), after_s=float(o["kernel_window_after_s"]),
                   spacing_steps=int(o["kernel_window_spacing_steps"]),
                   spacing_s=float(o["kernel_window_spacing_s"]), max_s=float(o["kernel_window_max_s"]),
                   ranks=max(1, ranks))

    @property
    def by_steps(self) -> bool:
        """Step numbers alone decide (a multi-rank job): every rank picks the same steps."""
        return self.ranks > 1

    def describe(self) -> str:
        """The schedule in words, for run.json."""
        if not self.by_steps:
            return (f"after {self.after_steps} steps and {self.after_s:g} s, {self.steps} steps each, "
                    f"{self.spacing_steps} steps and {self.spacing_s:g} s apart")
        return (f"by step number only ({self.ranks} ranks: a window on one rank alone would hold the others in "
                f"their next collective): steps {self.after_steps}+, {self.steps} steps each, "
                f"{self.spacing_steps} steps apart; time conditions dropped")

    @property
    def finished(self) -> bool:
        return self.stopped or (self.opened >= self.windows and not self.open)

    def decide(self, seq: int, now: float) -> str | None:
        """What to do at the end of step `seq`: INIT, START, STOP or None."""
        if self.stopped or self.windows <= 0:
            return None
        if self.open:
            self.in_window += 1
            if self.in_window >= self.steps or (not self.by_steps and now - self.opened_at >= self.max_s):
                return STOP
            return None
        if not self.initialised:
            return INIT
        if self.opened >= self.windows:
            return None
        if not self.warmed_up(seq, now):
            return None
        if self.last_close_seq is not None and (
            seq - self.last_close_seq < self.spacing_steps
            or (not self.by_steps and now - self.last_close_at < self.spacing_s)
        ):
            return None
        return START

    def quiet_until(self) -> tuple[int, float] | None:
        """Between windows: (step, time) that must both be reached before decide() can act;
        None while it must see every step end (init due, a window open, or none to come)."""
        if self.open or not self.initialised or self.finished:
            return None
        seq, t = self.after_steps, (float("-inf") if self.by_steps else self.installed_at + self.after_s)
        if self.last_close_seq is not None:
            seq = max(seq, self.last_close_seq + self.spacing_steps)
            if not self.by_steps:
                t = max(t, self.last_close_at + self.spacing_s)
        return seq, t

    def warmed_up(self, seq: int, now: float) -> bool:
        """Warm-up is over: enough steps and (one process alone) enough seconds."""
        return seq >= self.after_steps and (self.by_steps or now - self.installed_at >= self.after_s)

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


# -- environment probes (torch imported lazily: this module loads at torch's import) ----------

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


def stream_capturing() -> bool:
    """True while the current stream captures a CUDA graph (call only once CUDA is initialised)."""
    import torch

    return bool(torch.cuda.is_current_stream_capturing())


def cuda_built() -> str | None:
    """None when this torch can drive CUDA, else why not."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch is a reason, not a crash
        return f"torch import failed: {exc.__class__.__name__}"
    if not getattr(torch.version, "cuda", None):
        return "torch built without CUDA"
    return None


def cuda_runtime() -> str | None:
    """The CUDA runtime torch was built with (`torch.version.cuda`), e.g. "12.4"."""
    try:
        import torch

        return getattr(torch.version, "cuda", None)
    except Exception:  # noqa: BLE001
        return None


def graphs_in_use(recorder: Any) -> bool:
    """CUDA graphs seen: set by the graph hooks (`recorder.cuda_graphs`), or inductor's cudagraph trees loaded."""
    return bool(getattr(recorder, "cuda_graphs", False)) or "torch._inductor.cudagraph_trees" in sys.modules


# -- which backend, and whether CUPTI is torn down after each window -----------------------------

BACKENDS = ("auto", "cupti", "torch")
TEARDOWN_ENV = "TEARDOWN_CUPTI"
GRAPH_SAFE_CUDA = (12, 6)  # pytorch#144455: below this, teardown + re-init crashed CUDA-graph programs
NO_TEARDOWN_COST = ("CUPTI stays subscribed after the first window: a launch-bound loop kept "
                    "0.74-0.76 of its rate after windows on an H200")


def choose_backend(requested: str, cupti_installed: bool) -> tuple[str, str]:
    """(backend, why) for the `kernel_backend` option: `auto`, `cupti` or `torch`."""
    if requested == "torch":
        return "torch", "--kernel-backend torch"
    if requested == "cupti":
        if cupti_installed:
            return "cupti", "--kernel-backend cupti"
        return "torch", "--kernel-backend cupti, but cupti-python is not installed: torch.profiler instead"
    if cupti_installed:
        return "cupti", "cupti-python installed: CUPTI Activity API, imported at set-up, enabled only in windows"
    return "torch", "cupti-python not installed (pip install 'diag[cupti]'): torch.profiler, one-time init at set-up"


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """(12, 4) from "12.4"; None when unknown."""
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, TypeError):
        return None


def teardown_choice(foreign: tuple[str, str] | None, graphs: bool, cuda: str | None) -> tuple[bool, str]:
    """(teardown, why). `foreign`: (value, who) of a TEARDOWN_CUPTI that diag did not write."""
    if foreign is not None:
        value, who = foreign
        on = value == "1"
        why = f"{TEARDOWN_ENV}={value} set by {who}: respected"
        return on, why if on else f"{why}; {NO_TEARDOWN_COST}"
    v = version_tuple(cuda)
    if graphs and (v is None or v < GRAPH_SAFE_CUDA):
        return False, (f"CUDA graphs in use with CUDA runtime {cuda} < 12.6 (pytorch#144455: teardown then "
                       f"re-init crashed graph programs): no teardown; {NO_TEARDOWN_COST}")
    return True, "CUPTI torn down after each window" + (" (CUDA graphs in use, CUDA >= 12.6)" if graphs else "")


class TeardownEnv:
    """TEARDOWN_CUPTI in the environment: whose value it is, and diag's own writes."""

    def __init__(self, environ: Any = None) -> None:
        self.environ = os.environ if environ is None else environ
        self.at_install = self.environ.get(TEARDOWN_ENV)
        self.written: str | None = None

    def foreign(self) -> tuple[str, str] | None:
        """(value, who) when a value diag did not write is set, else None."""
        value = self.environ.get(TEARDOWN_ENV)
        if value is None or (self.written is not None and value == self.written):
            return None
        who = "the user" if self.written is None and value == self.at_install else "the program"
        return value, who

    def apply(self, teardown: bool) -> None:
        """Before a Kineto stop: `1` for teardown; `0` only to undo diag's own earlier `1`."""
        if self.foreign() is not None:
            return
        value = "1" if teardown else ("0" if self.written is not None else None)
        if value is not None:
            self.environ[TEARDOWN_ENV] = value
            self.written = value


# -- the two backends --------------------------------------------------------------------------

class TorchBackend:
    """torch.profiler windows: an early throwaway init, then start/stop/export per window."""

    name = "torch"
    early_init = True

    def __init__(self, make_profiler: Callable[[], Any], env: TeardownEnv) -> None:
        self.make_profiler = make_profiler
        self.env = env
        self._prof: Any = None

    def init(self, teardown: bool) -> None:
        prof = self.make_profiler()
        prof.start()
        self.env.apply(teardown)
        prof.stop()

    def start(self) -> None:
        self._prof = self.make_profiler()
        self._prof.start()

    def stop(self, path: str, teardown: bool) -> dict[str, Any]:
        prof, self._prof = self._prof, None
        self.env.apply(teardown)  # Kineto reads it as it stops
        prof.stop()
        prof.export_chrome_trace(path)
        return {}

    @property
    def on(self) -> bool:
        return self._prof is not None

    def abort(self) -> None:
        prof, self._prof = self._prof, None
        if prof is not None:
            try:
                prof.stop()
            except Exception:  # noqa: BLE001
                pass


class CuptiBackend:
    """cupti-python windows (diag/collect/cupti_backend.py): finalize as teardown.

    Its early init only imports cupti-python (~0.2 s measured on the H200), during
    the program's set-up like torch's init: paid inside the first window, that
    import cost a 10 s launch-bound run 2% of its throughput. Nothing is enabled
    before a window, so CUPTI does not tax the program meanwhile."""

    name = "cupti"
    early_init = True

    def __init__(self, window: Any = None) -> None:
        from .cupti_backend import CuptiWindow

        self.window = window if window is not None else CuptiWindow()

    def init(self, teardown: bool) -> None:
        self.window.prepare()

    def start(self) -> None:
        self.window.start()

    def stop(self, path: str, teardown: bool) -> dict[str, Any]:
        return self.window.stop(path, finalize=teardown)

    def wait(self) -> None:
        """The traces are written off the program's thread: let them finish (at exit)."""
        self.window.wait()

    @property
    def on(self) -> bool:
        return bool(self.window.on)

    def abort(self) -> None:
        self.window.abort()


class KernelWindows:
    """Runs the windows for one process; attach with `install(recorder)`."""

    def __init__(self, recorder: Any, scheduler: WindowScheduler,
                 make_profiler: Callable[[], Any] = _cuda_profiler,
                 cuda_ready: Callable[[], bool] = cuda_in_use,
                 profiler_busy: Callable[[], bool] = profiler_in_use,
                 clock: Callable[[], float] = time.monotonic,
                 wall_ns: Callable[[], int] = time.time_ns,
                 backend: Any = None, backend_why: str = "",
                 capturing: Callable[[], bool] = stream_capturing,
                 graphs: Callable[[], bool] | None = None,
                 cuda_version: Callable[[], str | None] = cuda_runtime,
                 env: TeardownEnv | None = None, requested: str = "auto") -> None:
        self.recorder = recorder
        self.scheduler = scheduler
        self.make_profiler = make_profiler
        self.cuda_ready = cuda_ready
        self.profiler_busy = profiler_busy
        self.clock = clock
        self.wall_ns = wall_ns
        self.capturing = capturing
        self.graphs = graphs if graphs is not None else (lambda: graphs_in_use(recorder))
        self.cuda_version = cuda_version
        self.env = env if env is not None else TeardownEnv()
        self.requested = requested
        self.backend = backend if backend is not None else TorchBackend(make_profiler, self.env)
        self.backend_why = backend_why or "torch.profiler"
        if not self.backend.early_init:
            scheduler.initialised = True  # nothing to pay before the first window
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._window_ts_ns = 0
        self._start_cost_ns = 0
        self._first_seq = 0
        self._capture_seen = False
        self._last_call: tuple[int, float] | None = None  # (seq, clock) at the last step-end call (_hold)
        self.torn_down = False       # a teardown has happened in this process
        self.teardown: bool | None = None
        self.teardown_why = ""
        self._announced: tuple[Any, ...] | None = None

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

    # -- the backend and teardown choice --------------------------------------------------
    def graphs_seen(self) -> bool:
        """CUDA graphs in use by the program (never raises)."""
        try:
            return self._capture_seen or bool(self.graphs())
        except Exception:  # noqa: BLE001
            return self._capture_seen

    def decide_teardown(self) -> bool:
        """Choose teardown now (before every stop), and record the choice when it changed."""
        teardown, why = teardown_choice(self.env.foreign(), self.graphs_seen(), self.cuda_version())
        self.teardown, self.teardown_why = teardown, why
        self.announce()
        return teardown

    def announce(self) -> None:
        """The `window`/`backend` event: which backend, teardown or not, and why (once per change)."""
        key = (self.backend.name, self.teardown, self.teardown_why, self.backend_why)
        if key == self._announced:
            return
        self._announced = key
        self._event("backend", self.wall_ns(), 0, backend=self.backend.name, requested=self.requested,
                    teardown=self.teardown, why=self.backend_why, teardown_why=self.teardown_why)

    def _capturing_now(self) -> bool:
        """True while a CUDA graph is being captured (this stream, or any thread's): no profiler call now."""
        try:
            if getattr(self.recorder, "capturing", 0) or self.capturing():
                self._capture_seen = True
                return True
        except Exception:  # noqa: BLE001 - cannot tell: act as before
            pass
        return False

    # -- the step-end callback ----------------------------------------------------------
    def on_step_end(self, seq: int) -> None:
        """Called by the recorder after each outermost step; never raises."""
        if self.scheduler.finished or not self._lock.acquire(blocking=False):
            return
        action = None
        try:
            now = self.clock()
            action = self.scheduler.decide(seq, now)
            if action is None:
                self._hold(seq, now)
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
            if self._capturing_now():
                return  # a graph capture is in progress: try again at the next step end
            if getattr(self, f"_{action}")(seq) is not False and not self.scheduler.finished:
                self.scheduler.done(action, seq, self.clock())
        except Exception as exc:  # noqa: BLE001 - a profiler failure must never reach the target
            self._abandon(f"{self._what()} {action} failed: {exc.__class__.__name__}: {exc}"[:300])
        finally:
            if self.scheduler.finished:
                self._detach()
            self._lock.release()

    def _hold(self, seq: int, now: float) -> None:
        """Between windows, tell the recorder which step end to call us at next (`step_end_due`):
        a graph-replay loop of 10 000 steps/s would otherwise pay this callback at each step.
        A time still to come is turned into steps at the loop's rate since the last call, halved,
        and at most twice the steps since that call (one short step must not skip thousands of
        long ones), so a loop that slows down is asked again before its due time, not long after."""
        due = self.scheduler.quiet_until()
        last, self._last_call = self._last_call, (seq, now)
        if due is None:
            return
        due_seq, due_t = due
        if now < due_t and last is not None and seq > last[0] and now > last[1]:
            rate = (seq - last[0]) / (now - last[1])
            ahead = min(int((due_t - now) * rate / 2), 2 * (seq - last[0]))
            due_seq = max(due_seq, seq + ahead)
        try:
            self.recorder.step_end_due = max(seq + 1, due_seq)
        except Exception:  # noqa: BLE001 - a recorder without the gate calls us every step
            pass

    def _what(self) -> str:
        return "torch.profiler" if self.backend.name == "torch" else "CUPTI (cupti-python)"

    def _detach(self) -> None:
        """All windows done (or abandoned): stop being called after every step."""
        try:
            self.recorder.on_step_end.remove(self.on_step_end)
        except (ValueError, AttributeError):
            pass

    def init_early(self) -> None:
        """Pay the torch profiler's one-time init now, during the program's set-up. Never raises."""
        if self.scheduler.initialised or self.scheduler.finished or not self._lock.acquire(blocking=False):
            return
        try:
            if self.scheduler.initialised or not self.cuda_ready():
                return
            if self.profiler_busy():
                self._abandon("the program runs its own profiler: no kernel windows")
                return
            if self._capturing_now():
                return  # the first step end does it instead
            if self._init(-1):
                self.scheduler.done(INIT, -1, self.clock())
        except Exception as exc:  # noqa: BLE001 - a profiler failure must never reach the target
            self._abandon(f"{self._what()} init failed: {exc.__class__.__name__}: {exc}"[:300])
        finally:
            self._lock.release()

    def _unsafe_for_ranks(self, teardown: bool) -> bool:
        """A multi-rank job without teardown: no windows at all (module doc), with the reason noted."""
        if not self.scheduler.by_steps or teardown:
            return False
        self.scheduler.failed()
        self.note(f"no kernel windows in a {self.scheduler.ranks}-rank job without CUPTI teardown "
                  f"({self.teardown_why}): CUPTI left subscribed beside NCCL's threads can hang the job")
        return True

    def _init(self, seq: int) -> bool:
        teardown = self.decide_teardown()
        if self._unsafe_for_ranks(teardown):
            return False
        ts, t0 = self.wall_ns(), time.perf_counter_ns()
        try:
            self.backend.init(teardown)
        except (ImportError, OSError) as exc:
            if self.backend.name != "cupti" or self.requested != "auto":
                raise
            self._fall_back(f"cupti-python failed to load ({exc.__class__.__name__}: {exc})"[:200], "at set-up")
            self.backend.init(teardown)
        self.torn_down = self.torn_down or teardown
        self._event("profiler_init", ts, time.perf_counter_ns() - t0, seq=seq)
        return True

    def old_cuda(self) -> bool:
        """The CUDA runtime is older than 12.6 (or unknown): teardown + re-init unsafe with graphs."""
        v = version_tuple(self.cuda_version())
        return v is None or v < GRAPH_SAFE_CUDA

    def _start(self, seq: int) -> bool:
        """Open a window; False when it did not open (the scheduler is told by the caller)."""
        if self.scheduler.by_steps and self._unsafe_for_ranks(self.decide_teardown()):
            return False
        if self.torn_down and self.graphs_seen() and self.old_cuda():
            # CUDA graphs appeared after a teardown on an old CUDA: the re-init is what crashed.
            self.decide_teardown()
            self.scheduler.failed()
            self.note(f"no further kernel windows: CUDA graphs appeared after a CUPTI teardown ({self.teardown_why})")
            return False
        ts, t0 = self.wall_ns(), time.perf_counter_ns()
        try:
            self.backend.start()
        except (ImportError, OSError) as exc:
            if self.backend.name != "cupti" or self.requested != "auto":
                raise
            self._fall_back(f"cupti-python failed to load ({exc.__class__.__name__}: {exc})"[:200],
                            "in the steady state")
            return False
        self._start_cost_ns = time.perf_counter_ns() - t0
        self._event("start", ts, self._start_cost_ns, window=self.scheduler.opened, seq=seq)
        self._window_ts_ns = ts + self._start_cost_ns
        self._first_seq = seq + 1
        self._set_in_window(True)
        return True

    def _fall_back(self, why: str, when: str) -> None:
        """auto: cupti-python cannot load, use torch.profiler (its init runs now or at the next step end)."""
        self.backend = TorchBackend(self.make_profiler, self.env)
        self.backend_why = f"{why}: torch.profiler instead, its one-time init paid {when}"
        self.scheduler.initialised = False
        self.announce()

    def _stop(self, seq: int) -> None:
        window = self.scheduler.opened - 1
        teardown = self.decide_teardown()
        stop_ts, t0 = self.wall_ns(), time.perf_counter_ns()
        self._set_in_window(False)
        name = f"window{window}.{self.pid}.json"
        out_dir = os.path.join(str(self.recorder.run_dir), "raw", "kineto")
        os.makedirs(out_dir, exist_ok=True)
        self.backend.stop(os.path.join(out_dir, name), teardown)
        self.torn_down = self.torn_down or teardown
        stop_cost = time.perf_counter_ns() - t0
        self._event("stop", stop_ts, stop_cost, window=window, seq=seq)
        self._write("windows", {"window": window, "ts_ns": self._window_ts_ns,
                                "dur_ns": max(0, stop_ts - self._window_ts_ns),
                                "steps": seq - self._first_seq + 1, "first_seq": self._first_seq,
                                "profiler_start_ns": self._start_cost_ns, "profiler_stop_ns": stop_cost,
                                "trace": name, "backend": self.backend.name})

    def _abandon(self, reason: str) -> None:
        self.scheduler.failed()
        self._set_in_window(False)
        try:
            self.backend.abort()
        except Exception:  # noqa: BLE001
            pass
        self.note(reason)

    def close(self) -> None:
        """At exit: close an open window so its trace is kept."""
        if not self._lock.acquire(timeout=1.0):
            return  # a step thread is inside the profiler: leave it
        try:
            if self.scheduler.open and self.backend.on and not self._capturing_now():
                try:
                    seq = self._first_seq + self.scheduler.in_window - 1
                    self._stop(seq)
                    self.scheduler.done(STOP, seq, self.clock())
                except Exception as exc:  # noqa: BLE001
                    self._abandon(f"{self._what()} stop at exit failed: {exc.__class__.__name__}")
            wait = getattr(self.backend, "wait", None)
            if wait is not None:
                try:
                    wait()
                except Exception:  # noqa: BLE001
                    pass
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




def world_size(environ: Any = None) -> int:
    """WORLD_SIZE as torchrun (or any launcher of torch.distributed) sets it; 1 when absent or bad."""
    try:
        return max(1, int((os.environ if environ is None else environ).get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def make_backend(requested: str, env: TeardownEnv,
                 cupti_installed: Callable[[], bool] | None = None) -> tuple[Any, str]:
    """The backend object for the `kernel_backend` option, and why it was chosen."""
    if cupti_installed is None:
        from .cupti_backend import available as cupti_installed
    name, why = choose_backend(requested, cupti_installed())
    if name == "cupti":
        return CuptiBackend(), why
    return TorchBackend(_cuda_profiler, env), why


def recorded_choice(events: list[dict[str, Any]]) -> dict[str, Any]:
    """run.json's kernel-window choice from the `events` rows: backend, teardown, why (last one wins)."""
    import json

    def detail(e: dict[str, Any]) -> dict[str, Any]:
        d = e.get("detail")
        try:
            d = json.loads(d) if isinstance(d, str) else d
        except ValueError:
            return {}
        return d if isinstance(d, dict) else {}

    choices = [detail(e) for e in events if e.get("kind") == "window" and e.get("name") == "backend"]
    if not choices:
        return {}
    out: dict[str, Any]
    d = choices[-1]
    out = {"backend": d.get("backend"), "teardown": d.get("teardown"),
           "why": "; ".join(str(w) for w in (d.get("why"), d.get("teardown_why")) if w)}
    schedules = [detail(e) for e in events if e.get("kind") == "window" and e.get("name") == "schedule"]
    if schedules:
        out["schedule"] = schedules[-1].get("schedule")
        out["world_size"] = schedules[-1].get("world_size")
    backends = sorted({str(c.get("backend")) for c in choices})
    if len(backends) > 1:
        out["backends"] = backends  # processes (or a fallback) used more than one
    return out


def install(recorder: Any) -> KernelWindows | None:
    """Attach kernel windows to the recorder, or note why not. Never raises."""
    try:
        options = dict(getattr(recorder, "options", None) or {})
        ranks = world_size()
        scheduler = WindowScheduler.from_options(options, installed_at=time.monotonic(), ranks=ranks)
        if scheduler.windows <= 0:
            KernelWindows(recorder, scheduler).note("kernel windows turned off (kernel_windows=0)")
            return None
        why_not = cuda_built()
        if why_not:
            KernelWindows(recorder, scheduler).note(why_not)
            return None
        requested = str(options.get("kernel_backend") or "auto")
        env = TeardownEnv()
        backend, why = make_backend(requested if requested in BACKENDS else "auto", env)
        kw = KernelWindows(recorder, scheduler, backend=backend, backend_why=why, env=env, requested=requested)
        kw.decide_teardown()  # the user's TEARDOWN_CUPTI is known now; graphs are not yet
        if scheduler.by_steps:
            kw._event("schedule", time.time_ns(), 0, schedule=scheduler.describe(), world_size=ranks)
        recorder.on_step_end.append(kw.on_step_end)
        if backend.early_init:
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
