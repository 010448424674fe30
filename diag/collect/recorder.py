"""The in-process recorder: one per target process, written through by the hooks.

Started by the bootstrap `sitecustomize` (diag/collect/bootstrap/) when
`DIAG_RUN_DIR` is set; `active_recorder()` returns it (None outside
`diag profile`). Standard library only: the recording side never imports
pandas, plotly, textual or pyarrow.

Options: `DIAG_OPTIONS` is a JSON object. Keys read here and by the hooks
(unknown keys are kept in `recorder.options` for other collectors, e.g. the
kernel windows' `kernel_windows`, `kernel_window_steps`):

    hooks              true   install any in-process hook at all
    torch              true   torch hooks (steps, copies, syncs, torch.load, torch.cuda.nvtx)
    onnxruntime        true   onnxruntime hooks (steps, session creation)
    nvtx               true   nvtx package hooks (ranges)
    copies             true   Tensor.to/.cuda/.cpu/.copy_ copies (torch)
    syncs              true   synchronizing calls (torch)
    gc                 true   GC pauses through gc.callbacks
    cuda_events        true   GPU time per step from torch.cuda.Event pairs
    cuda_event_all     64     time every one of the first N CUDA steps ...
    cuda_event_every   4      ... then 1 step in this many (gpu_ns = -1 on the others)
    table_rows         50000  rows kept in full per table before sampling starts
    detail_rows        2000   ... for syncs, copies and collectives (once a step or more)
    rows_per_s         1000   past detail_rows, steps, syncs, copies, collectives kept at most ~this many a second
    flush_s            1.0    background flush interval (a killed target loses at most this)

Bounded tables: after `table_rows` rows of a table, rows are kept 1 in 2
(`weight` 2), after `table_rows` more kept rows 1 in 4, and so on up to 1 in
1024: every table stays O(table_rows * log(rows seen)) rows (`detail_rows`
instead of `table_rows` for syncs, copies and collectives). Rows that come
once a step or more (steps, syncs, copies, collectives) are also kept at most
~`rows_per_s` a second once `detail_rows` of the kind have been seen: a loop
of 5000 steps/s keeps 1 step in 4 (weight 4), the power of two that brings
its rate under the cap, re-measured every 1024 rows. Turning a row into JSON
holds the GIL for a few µs, which a fast single-threaded loop pays in full;
1000 rows a second are plenty for percentiles and phases. Steps (and
collectives) inside a kernel window are always kept (weight 1): the analysis
reads them as window evidence and leaves them out of the step statistics.
Every row of
steps, copies, syncs, ranges and events carries `weight`: how many real rows it
stands for (1 for rows kept in full), so counts and sums stay estimable with
`sum(weight)`. One-off events (everything but `gc`) are never sampled. Step
`seq` counts every step, so kept steps show the gaps.

The meta table (`raw/meta.<pid>.jsonl`): each row is `ts_ns`, `pid` plus the
keys learned at that moment (`python`, `executable`, `argv`, `diag_options` at
start; `forked_from` in a forked child; `thread_ident`, `native_id`,
`thread_name` once per thread (maps py-spy's pthread ids to the native tids
of the other tables); `torch`, `cuda_runtime`
(torch.version.cuda: the CUDA runtime torch was built with), `hip` when torch
is imported; `onnxruntime`, `ort_device` when onnxruntime is). Merge a
process's rows in order; later keys win.

Writing: `write(table, row_dict)` queues a row (the flusher thread turns rows
into JSON every `flush_s`, at exit, on SIGTERM, and inline past 20 000 queued
rows); `step(row)` queues a steps row, a list in `diag.store.steps.STEP_COLUMNS`
order (the hot path: no dict; `sync()` queues its syncs row as a tuple the
same way, and `range()` its ranges row); `weight(table)` says whether to keep the next
row (see above). A SIGKILL loses at most the last `flush_s` of rows; the rest
stays readable.

The step lifecycle, for every framework hook (torch modules, ORT runs, and the
next one: CUDA-graph replays, compiled callables):

    row = rec.begin_step("ort", describe, sess, args, kwargs)  # None: nested in another step
    try:
        return original(sess, *args, **kwargs)
    finally:
        rec.end_step(row)

Only the outermost call of a thread is a step. `begin_step` numbers it (`seq`,
every step of the process, kept or not), decides its `weight`, calls
`describe(subject, args, kwargs) -> (model, batch, shapes, dtype, device)` only for a kept
step, resets the thread's sync count and takes the start time last.
A hook whose own per-step set-up comes after `begin_step` (torch records a
CUDA event) calls `restart_clock(row)` so that set-up is not in `dur_ns`.
`end_step` takes the duration first, then fills `syncs` (counted by `sync()`),
queues the row (or hands it to `defer(row, extra)`, which writes it later with
`step()`: torch waits for CUDA events), writes the `first_step` event and runs
the `on_step_end` callbacks. A hook may test `rec.state.depth` itself to skip
`begin_step` on nested calls (one thread-local read).

Contract for the kernel windows (diag/collect/kernel_windows.py):
  - `recorder.on_step_end`: list of callables; each is called as `cb(seq)` on
    the step's own thread right after every outermost step returns (also when
    it raised), after its row is queued. An exception in a callback becomes a
    `note` event and the callback is dropped.
  - `recorder.step_end_due`: int; the callbacks are called only for steps
    numbered at least this. A callback with nothing to do before a later step
    raises it (the kernel windows between windows), so a fast loop pays one
    comparison a step instead of a call.
  - `recorder.in_window`: bool; set it True while the profiler is on. A step
    that starts while it is True is written with `in_window: true`.
  - `recorder.event(kind, name, ts_ns, dur_ns, **detail)` writes an event row
    (e.g. kind `window`).
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..store.jsonl import RAW_DIR, JsonlWriter, os_error_text
from ..store.steps import DUR, MODEL, SEQ, SOURCE, STEP_COLUMNS, STEP_LAYOUT, SYNCS, TS, WEIGHT
from .options import defaults as _option_defaults
from .redact import redact_argv
from .request_context import CURRENT_REQUEST, RANGE_DEPTH  # noqa: F401 - RANGE_DEPTH: diag/api.py reads it here

TABLES = ("steps", "copies", "syncs", "ranges", "events", "meta")

DEFAULT_OPTIONS: dict[str, Any] = _option_defaults("target")  # the option table (options.py) owns them

# describe(subject, args, kwargs) -> (model, batch, shapes, dtype, device) of a kept step
Describe = Callable[[Any, tuple[Any, ...], "dict[str, Any] | None"], tuple[str, int, Any, str, str]]

_UNDESCRIBED = ("", -1, "", "", "")  # model, batch, shapes, dtype, device of a step not described

MAX_SAMPLE_LEVEL = 10  # keep at least 1 row in 1024
GC_RING = 4096  # GC pauses held between two flushes (a few hundred a second in a busy loop)
RATE_ROWS = 1024       # rows of a frequent table between two looks at its rate (the rate cap)
_NEVER_LOOKED = (-RATE_ROWS, 0)  # a table's first look at its rate is due at once
_NOT_CAPPED = (1, -1)  # no k worked out yet: due at once

_ACTIVE: Recorder | None = None


def active_recorder() -> Recorder | None:
    """The recorder of this process, or None when not run under `diag profile`."""
    return _ACTIVE


class ThreadState(threading.local):
    """Per-thread state the hooks share (class attributes are the defaults)."""

    tid = 0          # threading.get_native_id(), cached (it is a system call)
    depth = 0        # >0 while inside an outermost step (module call / ORT run)
    syncs = 0        # synchronizing calls made inside the current step
    range_depth = 0  # open NVTX / diag ranges on this thread
    draining = False  # this thread is writing rows out (a fork from a signal handler must not flush then)


class Recorder:
    """Holds one JSON-lines writer per table; hooks write rows through it."""

    def __init__(self, run_dir: str, options: dict[str, Any] | None = None) -> None:
        self.run_dir = run_dir
        self.options: dict[str, Any] = {**DEFAULT_OPTIONS, **(options or {})}
        self.pid = os.getpid()
        self.state = ThreadState()
        self.in_window = False
        self.capturing = 0  # CUDA graph captures in progress, any thread (hooks/cuda_graph.py)
        self.on_step_end: list[Callable[[int], None]] = []
        self.step_end_due = 0  # on_step_end runs from this step number on (a callback may raise it)
        self.seq_counter = itertools.count()  # step numbers of this process
        self.seq_start = 0  # the first of them (a forked child goes on from its parent's count)
        self._born = time.monotonic()  # young processes flush often (_flush_loop)
        self._writers: dict[str, JsonlWriter] = {}
        self._writers_lock = threading.Lock()
        # Rows wait here (deque append/popleft are thread-safe) and are turned
        # into JSON by the flusher thread, off the target's hot path.
        self._pending: dict[str, collections.deque[dict[str, Any]]] = {t: collections.deque() for t in TABLES}
        self._max_pending = 20_000
        self._seen: dict[str, int] = {}
        self._full = max(1, int(self.options["table_rows"]))
        # Rows that come once a step or more (syncs, copies, collectives) are sampled sooner:
        # formatting each one holds the GIL a fast loop needs (docs/performance.md).
        self.detail_full = max(1, int(self.options["detail_rows"]))
        self._rate_cap = max(1, int(self.options.get("rows_per_s") or 1))
        # The rate cap per frequent table: (rows seen, perf clock) at the last look, and 1 in how many to keep.
        self._rate_look: dict[str, tuple[int, int]] = {}
        self._rate_every: dict[str, int] = {}
        self._capped: dict[str, tuple[int, int]] = {}  # table -> (k, row number up to which k holds)
        # GC pauses wait in a ring allocated once, here: a list the collector grew (and the
        # flusher freed) ~100 times a second moved the top of the target's malloc heap, and
        # glibc then trimmed and re-faulted a torch loop's buffers every step (up to 25% of
        # its rate on the CPU box, docs/performance.md).
        self._gc_ring: list[tuple[int, int, int, int, int] | None] = [None] * GC_RING
        self._gc_head = 0  # pauses written (by the collecting thread, under the GIL)
        self._gc_tail = 0  # pauses drained (by the flusher)
        self._gc_skipped = 0  # pauses the full ring had no slot for: added to the next row's weight
        self._threads_seen: set[int] = set()  # thread idents already mapped in meta
        self._gc_start = 0
        self._gc_start_wall = 0
        self.flush_hooks: list[Callable[[bool], None]] = []  # called with final=True at exit
        # Rows lost before a writer had them (its file could not be opened, a row could not be
        # encoded); the writers count their own write errors. The end record reports both.
        self._dropped: dict[str, int] = {}
        self._errors: dict[str, str] = {}
        self._open_retry: dict[str, float] = {}  # a table whose file failed to open: next try then
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- writing -------------------------------------------------------------

    def _writer(self, table: str) -> JsonlWriter:
        w = self._writers.get(table)
        if w is None:
            with self._writers_lock:
                w = self._writers.get(table)
                if w is None:
                    # Our own flusher thread flushes by time, so the writer only by size.
                    w = JsonlWriter(self.run_dir, table, flush_rows=256, flush_s=1e9)
                    self._writers[table] = w
        return w

    def weight(self, table: str, full: int | None = None) -> int:
        """0 to drop this row, else how many rows it stands for (see module doc).

        `full`: rows kept whole before sampling starts, when a kind of row comes
        so often that `table_rows` of them would cost the program (collectives:
        several per step)."""
        n = self._seen.get(table, 0)
        self._seen[table] = n + 1  # a race between threads only miscounts by one
        full = self._full if full is None else full
        return 1 if n < full else self._sampled_weight(n, full)

    def frequent_weight(self, table: str) -> int:
        """weight() for a kind of row that comes once a step or more (copies, collectives):
        `detail_rows` kept whole, then the level scheme and the rate cap."""
        n = self._seen.get(table, 0)
        self._seen[table] = n + 1
        return 1 if n < self.detail_full else self._capped_weight(table, n, self.detail_full)

    def _capped_weight(self, table: str, n: int, level_full: int) -> int:
        """Past detail_rows: keep row n 1 in k, k the larger of the level scheme's and the rate cap's.

        Every step's path (a graph replay may come 10 000 times a second): k is worked out
        again only where it can change, at the rate cap's next look or the next level."""
        k, until = self._capped.get(table, _NOT_CAPPED)
        if n >= until:
            k, until = self._recap(table, n, level_full)
        return k if n % k == 0 else 0

    def _recap(self, table: str, n: int, level_full: int) -> tuple[int, int]:
        """k for row n on, and the row number up to which it holds."""
        if n - self._rate_look.get(table, _NEVER_LOOKED)[0] >= RATE_ROWS:
            self._retune_rate(table, n)
        k = self._rate_every.get(table, 1)
        until = self._rate_look[table][0] + RATE_ROWS
        if n >= level_full:
            level = (n // level_full + 1).bit_length() - 1
            k = max(k, 1 << min(level, MAX_SAMPLE_LEVEL))
            if level < MAX_SAMPLE_LEVEL:  # the level rises where n // level_full + 1 reaches 2 ** (level + 1)
                until = min(until, level_full * ((1 << (level + 1)) - 1))
        else:
            until = min(until, level_full)
        self._capped[table] = (k, until)
        return k, until

    def _retune_rate(self, table: str, n: int) -> None:
        """The rate cap's 1-in-k for `table` from its rows per second since the last look."""
        now = _perf_ns()
        n0, t0 = self._rate_look.get(table, (n, 0))
        if t0:
            rate = (n - n0) * 1e9 / max(1, now - t0)
            every = 1
            while rate / (every * 2) >= self._rate_cap and every < 1024:
                every *= 2
            self._rate_every[table] = every
        self._rate_look[table] = (n, now)

    def _sampled_weight(self, n: int, full: int | None = None) -> int:
        """weight() of the table's row number n once past `full` (default `table_rows`)."""
        k = self._sample_k(n, full)
        return k if n % k == 0 else 0

    def _sample_k(self, n: int, full: int | None = None) -> int:
        """1 in how many rows the level scheme keeps at the table's row number n (past `full`)."""
        return 1 << min(((n // (full or self._full)) + 1).bit_length() - 1, MAX_SAMPLE_LEVEL)

    def write(self, table: str, row: dict[str, Any]) -> None:
        """Append a finished row (pid is added here). Never raises."""
        if self._closed:
            return
        row["pid"] = self.pid
        buf = self._pending.get(table)
        if buf is None:
            buf = self._pending.setdefault(table, collections.deque())
        buf.append(row)
        if len(buf) >= self._max_pending:
            self._drain(table)

    def step(self, row: list[Any]) -> None:
        """Queue a finished steps row, a list in STEP_COLUMNS order (the fast path; no dict)."""
        buf = self._pending["steps"]
        buf.append(row)
        if len(buf) >= self._max_pending:
            self._drain("steps")

    # -- the step lifecycle (module doc) ---------------------------------------

    def begin_step(self, source: str, describe: Describe | None = None, subject: Any = None,
                   args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> list[Any] | None:
        """Start a step on this thread: its row, or None when nested in another step.

        The step is the call `subject(*args, **kwargs)` (a module, a session,
        a graph); `describe(subject, args, kwargs)` returns `(model, batch,
        shapes, dtype, device)` and is called only when the row is kept,
        before the clock starts. Pass the result to `end_step`, also when
        the call raised.
        """
        state = self.state
        if state.depth:
            return None
        seq = next(self.seq_counter)
        seen = self._seen  # weight("steps"), inlined: this is every step's path
        n = seen.get("steps", 0)
        seen["steps"] = n + 1
        if self.in_window:  # window steps are evidence: kept (module doc)
            weight = 1
        elif n < self.detail_full:
            weight = 1 if n < self._full else self._sampled_weight(n)
        else:
            weight = self._capped_weight("steps", n, self._full)
        if not weight:  # sampled away: counted (seq, end_step's callbacks) and nested calls kept out; no clock
            state.syncs = 0
            state.depth = 1
            return [0, 0, 0, source, *_UNDESCRIBED, -1, 0, seq, False, 0]  # STEP_COLUMNS order
        described = _UNDESCRIBED
        if describe is not None:
            try:
                described = describe(subject, args, kwargs)
            except Exception:  # noqa: BLE001 - never hurt the target: the step stays, undescribed
                pass
        row = [0, 0, state.tid or self._new_tid(), source, *described, -1, 0, seq, self.in_window, weight]
        state.syncs = 0
        state.depth = 1
        # The clock starts last (as restart_clock does); DUR holds the start on the
        # perf counter until end_step turns it into the duration.
        row[TS] = _time_ns()
        row[DUR] = _perf_ns()
        return row

    @staticmethod
    def restart_clock(row: list[Any]) -> None:
        """Start a begun step's clock again: the hook's own set-up since begin_step is not the step's time."""
        row[TS] = _time_ns()
        row[DUR] = _perf_ns()

    def end_step(self, row: list[Any] | None, defer: Callable[[list[Any], Any], None] | None = None,
                 extra: Any = None) -> None:
        """Finish a step begun by `begin_step` (None: a nested call, nothing to do). Never raises.

        The row is queued, or handed to `defer(row, extra)` when given (which
        writes it later with `step()`); a row sampled out (`weight` 0) is not
        written, but still counts for the callbacks (the first step is always kept).
        """
        end = _perf_ns()
        if row is None:
            return
        state = self.state
        state.depth = 0
        if not row[WEIGHT]:  # sampled away (begin_step): nothing to write
            if self.on_step_end and row[SEQ] >= self.step_end_due:
                self.step_ended(row[SEQ])
            return
        row[DUR] = end - row[DUR]
        row[SYNCS] = state.syncs
        try:
            if defer is None:
                buf = self._pending["steps"]  # step(row), inlined: this is every step's path
                buf.append(row)
                if len(buf) >= self._max_pending:
                    self._drain("steps")
            else:
                defer(row, extra)
            if row[SEQ] == 0:
                self.event("first_step", row[MODEL] or row[SOURCE], ts_ns=row[TS], dur_ns=row[DUR],
                           source=row[SOURCE])
        except Exception:  # noqa: BLE001 - never hurt the target
            pass
        if self.on_step_end and row[SEQ] >= self.step_end_due:
            self.step_ended(row[SEQ])

    def sync(self, api: str, ts_ns: int, dur_ns: int) -> None:
        """A synchronizing call: a `syncs` row, also counted in the current step's `syncs`."""
        w = self.sync_weight()
        if w:
            self.sync_row(api, ts_ns, dur_ns, w)

    def sync_weight(self) -> int:
        """Count a synchronizing call about to be made (and in the current step's `syncs`): the
        weight of its row, 0 when sampled away. A hook asks before the call, so that a
        sampled-away sync (most of them in a fast loop) costs no clock reads."""
        state = self.state
        if state.depth:
            state.syncs += 1
        seen = self._seen  # weight("syncs", detail_full), inlined: a program may sync every step
        n = seen.get("syncs", 0)
        seen["syncs"] = n + 1
        return 1 if n < self.detail_full else self._capped_weight("syncs", n, self.detail_full)

    def sync_row(self, api: str, ts_ns: int, dur_ns: int, weight: int) -> None:
        """Queue the `syncs` row of a call that `sync_weight` kept (weight > 0)."""
        if self._closed:
            return
        state = self.state
        # A tuple, not a dict: a program may sync once a step (`.item()`); the flusher encodes it (_sync_line).
        buf = self._pending["syncs"]
        buf.append((ts_ns, dur_ns, state.tid or self._new_tid(), api, state.depth > 0, weight))
        if len(buf) >= self._max_pending:
            self._drain("syncs")

    def _drain(self, table: str) -> None:
        buf = self._pending[table]
        if not buf:
            return
        state = self.state
        state.draining = True
        rows: list[Any] = []
        try:
            while True:
                try:
                    rows.append(buf.popleft())
                except IndexError:
                    break
            w = self._open(table)
            if w is None or w.failing():  # count, do not format: a disk that stays full costs nothing more
                self._lose(table, len(rows), w)
                return
            if table == "steps":
                pid = self.pid
                lines = [_step_line(r, pid) if type(r) is list else _encode(r) for r in rows]
            elif table == "syncs" or table == "ranges":
                pid = self.pid
                line = _sync_line if table == "syncs" else _range_line
                lines = [line(r, pid) if type(r) is tuple else _encode(r) for r in rows]
            else:
                if table == "events":  # detail is a JSON string column: encode it here, off the caller's thread
                    for r in rows:
                        r["detail"] = _encode(r["detail"])
                lines = [_encode(r) for r in rows]
            w.write_lines(lines)
        except Exception as exc:  # noqa: BLE001 - never hurt the target: the rows are lost, and counted
            self._lose(table, len(rows), None, exc)
        finally:
            state.draining = False

    def _open(self, table: str) -> JsonlWriter | None:
        """The table's writer, or None while its file cannot be opened (tried again after a while)."""
        w = self._writers.get(table)
        if w is not None:
            return w
        if self._open_retry.get(table, 0.0) > time.monotonic():
            return None
        try:
            return self._writer(table)
        except OSError as exc:  # e.g. EPERM (an immutable dir), ELOOP (a link planted at the name)
            self._errors.setdefault(table, os_error_text(exc))
            self._open_retry[table] = time.monotonic() + JsonlWriter.RETRY_S
            return None

    def _lose(self, table: str, n: int, writer: JsonlWriter | None, exc: Exception | None = None) -> None:
        if writer is not None:
            writer.drop(n)
        else:
            self._dropped[table] = self._dropped.get(table, 0) + n
        if exc is not None:
            self._errors.setdefault(table, os_error_text(exc) if isinstance(exc, OSError) else repr(exc)[:200])

    def end_record(self) -> dict[str, Any]:
        """What this process recorded: steps made, rows written and dropped per table, first errors."""
        rows: dict[str, dict[str, int]] = {}
        errors: dict[str, str] = {}
        for table in sorted({*self._writers, *self._dropped, *self._errors}):
            w = self._writers.get(table)
            rows[table] = {"written": w.written if w else 0,
                           "dropped": (w.dropped if w else 0) + self._dropped.get(table, 0)}
            error = self._errors.get(table) or (w.error if w else "")
            if error:
                errors[table] = error
        seq_next = next(self.seq_counter)
        self.seq_counter = itertools.count(seq_next)
        return {"pid": self.pid, "ts_ns": time.time_ns(), "seq_start": self.seq_start, "seq_next": seq_next,
                "steps": seq_next - self.seq_start, "rows": rows, "errors": errors}

    def _write_end(self) -> None:
        # One small file per process, written last: its absence says the process left
        # without this exit path (os._exit, a crash, SIGKILL) and its last rows may be lost.
        try:
            path = os.path.join(self.run_dir, RAW_DIR, f"end.{self.pid}.json")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, _encode(self.end_record()).encode() + b"\n")
            finally:
                os.close(fd)
        except Exception:  # noqa: BLE001 - then the missing record is the signal
            pass

    def tid(self) -> int:
        """This thread's native id, cached per thread."""
        state = self.state
        return state.tid or self._new_tid()

    def _new_tid(self) -> int:
        self.state.tid = threading.get_native_id()
        self._map_thread(threading.get_ident(), self.state.tid, threading.current_thread().name)
        return self.state.tid

    def _map_thread(self, ident: int, native: int, name: str) -> None:
        # py-spy names threads by pthread id (threading ident); other tables use native ids.
        if ident not in self._threads_seen:
            self._threads_seen.add(ident)
            self.meta(thread_ident=ident, native_id=native, thread_name=name)

    def _map_threads(self) -> None:
        for t in threading.enumerate():
            native = getattr(t, "native_id", None)
            if t.ident and native and t.ident not in self._threads_seen:
                self._map_thread(t.ident, native, t.name)

    def event(self, kind: str, name: str = "", ts_ns: int | None = None, dur_ns: int = 0,
              weight: int = 1, tid: int | None = None, **detail: Any) -> None:
        """Write an `events` row; `detail` becomes its JSON `detail` column."""
        self.write("events", {
            "ts_ns": time.time_ns() if ts_ns is None else ts_ns, "dur_ns": dur_ns,
            "tid": self.tid() if tid is None else tid, "kind": kind, "name": name,
            "detail": detail, "weight": weight,  # a JSON string once the flusher writes it (_drain)
        })

    def note(self, name: str, reason: str) -> None:
        """Something could not be hooked or recorded: say why, and go on."""
        self.event("note", name, reason=reason)

    def range(self, name: str, ts_ns: int, dur_ns: int, source: str = "diag", domain: str = "",
              depth: int = -1, tid: int | None = None) -> None:
        """One finished range (NVTX or diag.request/stage). depth -1: unknown."""
        seen = self._seen  # weight("ranges"), inlined: NVTX ranges may come by the million
        n = seen.get("ranges", 0)
        seen["ranges"] = n + 1
        w = 1 if n < self._full else self._sampled_weight(n)
        if not w or self._closed:
            return
        req = CURRENT_REQUEST.get()  # the hooked request (ASGI/WSGI/generate) it ran in, if any
        buf = self._pending["ranges"]  # a tuple the flusher encodes (_range_line): no dict on the caller's thread
        buf.append((ts_ns, dur_ns, (self.state.tid or self._new_tid()) if tid is None else tid, name, source,
                    domain or "", depth, w, req.rid if req is not None else 0))
        if len(buf) >= self._max_pending:
            self._drain("ranges")

    def meta(self, **values: Any) -> None:
        """A meta row: versions and facts about this process (see module doc)."""
        self.write("meta", {"ts_ns": time.time_ns(), **values})

    def step_ended(self, seq: int) -> None:
        """Run the on_step_end callbacks (kernel windows); never raises."""
        for cb in list(self.on_step_end):
            try:
                cb(seq)
            except Exception as exc:  # noqa: BLE001
                try:
                    self.on_step_end.remove(cb)
                except ValueError:
                    pass
                self.note("on_step_end", f"callback {getattr(cb, '__qualname__', cb)!r} failed: {exc!r}")

    # -- GC pauses -----------------------------------------------------------

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        # Runs inside the collector: only take times and append (no locks, no I/O).
        if phase == "start":
            self._gc_start_wall = time.time_ns()
            self._gc_start = time.perf_counter_ns()
        elif self._gc_start:
            head = self._gc_head
            if head - self._gc_tail < GC_RING:
                self._gc_ring[head % GC_RING] = (
                    self._gc_start_wall, time.perf_counter_ns() - self._gc_start,
                    self.state.tid or self._new_tid(), info.get("generation", -1), info.get("collected", 0))
                self._gc_head = head + 1  # after the slot is filled: the drain reads up to here
            else:
                self._gc_skipped += 1
            self._gc_start = 0

    def _drain_gc(self) -> None:
        ring, head = self._gc_ring, self._gc_head
        for i in range(self._gc_tail, head):
            ts, dur, tid, gen, collected = ring[i % GC_RING]  # type: ignore[misc]
            ring[i % GC_RING] = None
            w = self.weight("gc")
            if w:
                skipped, self._gc_skipped = self._gc_skipped, 0
                self.event("gc", f"gen{gen}", ts_ns=ts, dur_ns=dur, weight=w + skipped, tid=tid,
                           generation=gen, collected=collected)
        self._gc_tail = head

    # -- flushing and lifetime -----------------------------------------------

    def flush(self, final: bool = False) -> None:
        """Write out everything buffered. Never raises."""
        for hook in list(self.flush_hooks):
            try:
                hook(final)
            except Exception:  # noqa: BLE001
                pass
        try:
            self._drain_gc()
            self._map_threads()
        except Exception:  # noqa: BLE001
            pass
        for table in list(self._pending):
            self._drain(table)
        for w in list(self._writers.values()):
            w.flush()

    def _flush_loop(self) -> None:
        # A young process flushes often (every 1/20 of its age, at least every 20 ms): one that
        # leaves without cleanup (os._exit, a crash) loses at most ~5% of its life, not flush_s.
        interval = float(self.options.get("flush_s") or 1.0)
        while not self._stop.wait(min(interval, max(0.02, (time.monotonic() - self._born) / 20))):
            self.flush()

    def close(self) -> None:
        """Final flush (atexit)."""
        if self._closed:
            return
        # Stop the flusher first: rows it has taken from the queue but not yet
        # written would be lost if the writers closed under it.
        self._stop.set()
        flusher = self._thread
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join(timeout=2.0)
        self.flush(final=True)
        self._closed = True
        for w in list(self._writers.values()):
            w.close()
        self._write_end()

    def start(self) -> None:
        """Begin recording: process facts, GC callback, flusher, exit handlers."""
        argv = redact_argv(sys.argv) if self.options.get("redact", True) else sys.argv  # docs/security.md
        self.meta(python=sys.version.split()[0], executable=sys.executable, argv=argv,
                  diag_options=self.options, seq_start=self.seq_start)
        start = process_start_ns()
        if start:
            self.event("process_start", "interpreter", ts_ns=start, dur_ns=max(0, time.time_ns() - start),
                       ppid=os.getppid(), executable=sys.executable)
        if self.options.get("gc", True):
            import gc

            gc.callbacks.append(self._on_gc)
        atexit.register(self.close)
        self._start_thread()
        _install_sigterm_flush(self)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(before=self._before_fork, after_in_child=self._after_fork_child)

    def _start_thread(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._flush_loop, name="diag-flush", daemon=True)
        self._thread.start()

    def _before_fork(self) -> None:
        # Write what is queued now, so a parent that later leaves through os._exit has lost less;
        # not when this thread was interrupted while writing (a fork from a signal handler).
        if not self.state.draining and not self._closed:
            self.flush()

    def _after_fork_child(self) -> None:
        # A forked child (DataLoader worker, multiprocessing) gets its own files, counts and
        # flusher; buffered rows belong to the parent, which writes them.
        for w in self._writers.values():
            try:
                os.close(w._fd)
            except OSError:
                pass
        self._writers = {}
        self._writers_lock = threading.Lock()
        self._pending = {t: collections.deque() for t in TABLES}
        self._seen = {}
        self._dropped, self._errors, self._open_retry = {}, {}, {}
        self._born = time.monotonic()
        self.seq_start = next(self.seq_counter)  # step numbers go on from the parent's
        self.seq_counter = itertools.count(self.seq_start)
        self._gc_ring = [None] * GC_RING
        self._gc_head = self._gc_tail = self._gc_skipped = 0
        self.state.tid = 0  # the forking thread lives on in the child under a new id
        self._threads_seen = set()
        self.pid = os.getpid()
        self.meta(python=sys.version.split()[0], forked_from=os.getppid(), seq_start=self.seq_start)
        self._start_thread()
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:
            # A multiprocessing child leaves through os._exit (no atexit) after running
            # its finalizers; it clears inherited ones first, then runs after-fork hooks.
            mp_util.register_after_fork(self, Recorder._close_at_mp_exit)

    def _close_at_mp_exit(self) -> None:
        import multiprocessing.util

        multiprocessing.util.Finalize(None, self.close, exitpriority=-100)


_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
_time_ns = time.time_ns
_perf_ns = time.perf_counter_ns
_JSON_STRINGS: dict[str, str] = {}


def _json_str(value: Any) -> str:
    out = _JSON_STRINGS.get(value)
    if out is None:
        out = json.dumps(str(value))
        if len(_JSON_STRINGS) < 10_000:
            _JSON_STRINGS[value] = out
    return out


def shapes_text(shapes: Any) -> str:
    """`[[8,3,224,224]]` from a list of shapes (the steps' `shapes` column)."""
    if isinstance(shapes, str):
        return shapes
    return str([list(s) for s in shapes]).replace(" ", "")


_SHAPES_JSON: dict[tuple[Any, ...], str] = {}


def _shapes_json(shapes: Any) -> str:
    """shapes_text as a JSON string, cached: a server sees few distinct shapes."""
    try:
        key = tuple(shapes)
        out = _SHAPES_JSON.get(key)
    except TypeError:  # unhashable
        return json.dumps(shapes_text(shapes))
    if out is None:
        out = json.dumps(shapes_text(shapes))
        if len(_SHAPES_JSON) < 10_000:
            _SHAPES_JSON[key] = out
    return out


def _json_bool(value: Any) -> str:
    return "true" if value else "false"


# A steps row as one JSON line, built from the one layout (diag.store.steps): a format
# string, about twice as fast as the json module; only non-int columns need encoding.
_STEP_LINE = "{" + ",".join(f'"{name}":%{"d" if kind == "int" else "s"}' for name, kind in STEP_LAYOUT) + ',"pid":%d}'
_STEP_ENCODE = tuple((i, {"str": _json_str, "shapes": _shapes_json, "bool": _json_bool}[kind])
                     for i, (_, kind) in enumerate(STEP_LAYOUT) if kind != "int")


def _step_line(v: list[Any], pid: int) -> str:
    """A steps row (a list in STEP_COLUMNS order) as a JSON line with `pid` added."""
    try:
        values = list(v)
        for i, encode in _STEP_ENCODE:
            values[i] = encode(values[i])
        values.append(pid)
        return _STEP_LINE % tuple(values)
    except (TypeError, ValueError, IndexError):  # an unusual value: the general encoder handles it
        row = dict(zip(STEP_COLUMNS, v, strict=False))
        row["shapes"] = shapes_text(row.get("shapes", ""))
        row["pid"] = pid
        return _encode(row)


_SYNC_LINE = '{"ts_ns":%d,"dur_ns":%d,"tid":%d,"api":%s,"in_step":%s,"weight":%d,"pid":%d}'


def _sync_line(v: tuple[Any, ...], pid: int) -> str:
    """A syncs row queued by `sync()` (ts_ns, dur_ns, tid, api, in_step, weight) as a JSON line with `pid`."""
    ts, dur, tid, api, in_step, w = v
    try:
        return _SYNC_LINE % (ts, dur, tid, _json_str(api), "true" if in_step else "false", w, pid)
    except (TypeError, ValueError):  # an unusual value: the general encoder handles it
        return _encode({"ts_ns": ts, "dur_ns": dur, "tid": tid, "api": api, "in_step": bool(in_step),
                        "weight": w, "pid": pid})


_RANGE_LINE = ('{"ts_ns":%d,"dur_ns":%d,"tid":%d,"name":%s,"kind":%s,"source":%s,"domain":%s,"depth":%d,'
               '"weight":%d,"rid":%d,"pid":%d}')


def _range_line(v: tuple[Any, ...], pid: int) -> str:
    """A ranges row queued by `range()` as a JSON line with `kind` and `pid`."""
    ts, dur, tid, name, source, domain, depth, w, rid = v
    kind = "request" if name == "request" else "stage"
    try:
        return _RANGE_LINE % (ts, dur, tid, _json_str(name), '"' + kind + '"', _json_str(source), _json_str(domain),
                              depth, w, rid, pid)
    except (TypeError, ValueError):  # an unusual value: the general encoder handles it
        return _encode({"ts_ns": ts, "dur_ns": dur, "tid": tid, "name": name, "kind": kind, "source": source,
                        "domain": domain, "depth": depth, "weight": w, "rid": rid, "pid": pid})


def process_start_ns() -> int | None:
    """The interpreter's start time (ns since the epoch) from /proc, or None."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode()
        with open("/proc/uptime", "rb") as f:
            uptime_s = float(f.read().split()[0])
        start_ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22: starttime
        age_s = uptime_s - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.time_ns() - int(max(0.0, age_s) * 1e9)
    except (OSError, ValueError, IndexError):
        return None


def _install_sigterm_flush(rec: Recorder) -> None:
    """On SIGTERM (left at its default), flush, then die by SIGTERM as before."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def on_term(signum: int, frame: Any) -> None:
            # On another thread, bounded: this thread may hold a writer's lock right now.
            closer = threading.Thread(target=rec.close, name="diag-close", daemon=True)
            closer.start()
            closer.join(2.0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError, AttributeError):
        pass


def _options_from_env() -> tuple[dict[str, Any], str | None]:
    raw = os.environ.get("DIAG_OPTIONS", "")
    if not raw:
        return {}, None
    try:
        opts = json.loads(raw)
    except ValueError as exc:
        return {}, f"DIAG_OPTIONS is not JSON ({exc}); using defaults"
    if not isinstance(opts, dict):
        return {}, "DIAG_OPTIONS is not a JSON object; using defaults"
    return opts, None


def start_from_env() -> Recorder | None:
    """Create and start this process's recorder from DIAG_RUN_DIR / DIAG_OPTIONS.

    Called once by the bootstrap sitecustomize. Returns None when DIAG_RUN_DIR
    is unset. Hook installation failures become `note` events.
    """
    global _ACTIVE
    run_dir = os.environ.get("DIAG_RUN_DIR")
    if not run_dir:
        return None
    if _ACTIVE is not None:
        return _ACTIVE
    options, problem = _options_from_env()
    rec = Recorder(run_dir, options)
    _ACTIVE = rec
    rec.start()
    if problem:
        rec.note("options", problem)
    if rec.options.get("hooks", True):
        try:
            from .hooks import install_import_hooks

            install_import_hooks(rec)
        except Exception as exc:  # noqa: BLE001
            rec.note("hooks", f"import hooks not installed: {exc!r}")
    return rec
