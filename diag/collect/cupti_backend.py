"""Kernel windows through NVIDIA's cupti-python (CUPTI Activity API), written as a Kineto trace.

Recording side: standard library only; `cupti` (PyPI `cupti-python`, extra
`diag[cupti]`) is imported at the first window's start, never before, so a
program that never reaches a window pays nothing and its time to first step is
untouched.

Why not torch.profiler: its first start costs seconds of CUPTI init on the
program's thread (3.4-4.3 s on an H200), while enabling the Activity API
directly costs 11-16 ms, first window included, and `cupti.finalize()` after
each window leaves a launch-bound loop at 0.99-1.01 of its rate
(benchmarks/cupti_probe.py). Only GPU-side activity is recorded (kernels,
memcpy, memset): runtime-API records made collection ~3x slower and launch
gaps come from the gaps between kernels on the GPU anyway.

The trace is a chrome trace in Kineto's own shape (`cat` `kernel`,
`gpu_memcpy`, `gpu_memset`; names such as `Memcpy HtoD (Pageable -> Device)`
and `Memset (Device)`; `pid` the device, `tid` the stream; `ts`/`dur` in µs
after `baseTimeNanoseconds`, Unix-epoch ns), so diag/store/kineto.py reads it
like a torch.profiler window. CUPTI's clock is put on the wall clock by
reading `cupti.get_timestamp()` between two `time.time_ns()` calls at start
and stop.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

BUFFER_BYTES = 8 << 20   # CUPTI asks for activity buffers of this size
MAX_RECORDS = 200_000    # a window keeps at most this many activity records (bounded memory)

# CUPTI enum values (cupti_activity.h), as Kineto names them in its traces.
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}
MEMORY_KINDS = {0: "Unknown", 1: "Pageable", 2: "Pinned", 3: "Device", 4: "Array", 5: "Managed",
                6: "Device Static", 7: "Managed Static"}

KERNEL, MEMCPY, MEMSET = "kernel", "gpu_memcpy", "gpu_memset"


def available() -> bool:
    """True when cupti-python is installed (looked up, not imported: importing loads libcupti)."""
    try:
        return importlib.util.find_spec("cupti") is not None
    except (ImportError, ValueError):
        return False


def load_api() -> Any:
    """The `cupti.cupti` module. ImportError/OSError when it or libcupti cannot be loaded."""
    from cupti import cupti

    return cupti


def learn_enums(api: Any) -> None:
    """Refresh COPY_KINDS / MEMORY_KINDS from the bindings' own enums (`HTOD` -> `HtoD`,
    `DEVICE_STATIC` -> `Device Static`), so a renumbered CUPTI still gets Kineto's names."""
    for enum_name, table, spell in (
        ("ActivityMemcpyKind", COPY_KINDS, lambda n: n[0] + "to" + n[3] if len(n) == 4 and n[1:3] == "TO" else None),
        ("ActivityMemoryKind", MEMORY_KINDS, lambda n: n.replace("_", " ").title()),
    ):
        for member in getattr(api, enum_name, None) or ():
            name = str(getattr(member, "name", ""))
            text = spell(name) if name and name != "FORCE_INT" else None
            if text:
                table[int(member)] = text


def memcpy_name(copy_kind: int, src_kind: int, dst_kind: int) -> str:
    """Kineto's name for a memcpy record, e.g. `Memcpy HtoD (Pinned -> Device)`."""
    return (f"Memcpy {COPY_KINDS.get(copy_kind, '<unknown>')} "
            f"({MEMORY_KINDS.get(src_kind, 'Unknown')} -> {MEMORY_KINDS.get(dst_kind, 'Unknown')})")


def memset_name(memory_kind: int) -> str:
    """Kineto's name for a memset record, e.g. `Memset (Device)`."""
    return f"Memset ({MEMORY_KINDS.get(memory_kind, 'Unknown')})"


class _Demangler:
    """C++ names through libstdc++'s `__cxa_demangle` (loaded by torch already); raw name when it fails."""

    def __init__(self) -> None:
        self._fn: Any = None
        self._free: Any = None
        self._cache: dict[str, str] = {}
        try:
            lib = ctypes.CDLL("libstdc++.so.6")
            fn = getattr(lib, "__cxa_demangle")  # getattr: a class body would mangle the dunder name
            fn.restype = ctypes.c_void_p
            fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            free = ctypes.CDLL(None).free
            free.argtypes = [ctypes.c_void_p]
            self._fn, self._free = fn, free
        except (OSError, AttributeError):
            pass

    def __call__(self, name: str) -> str:
        if not name.startswith("_Z") or self._fn is None:
            return name
        out = self._cache.get(name)
        if out is None:
            out = name
            status = ctypes.c_int(-1)
            ptr = self._fn(name.encode(), None, None, ctypes.byref(status))
            if ptr:
                try:
                    if status.value == 0:
                        out = ctypes.string_at(ptr).decode(errors="replace")
                finally:
                    self._free(ptr)
            if len(self._cache) < 50_000:
                self._cache[name] = out
        return out


_DEMANGLER: _Demangler | None = None


def demangle(name: str) -> str:
    """A kernel's C++ name as Kineto shows it (`_Z10add_kernelPfS_` -> `add_kernel(float*, float*)`)."""
    global _DEMANGLER
    if _DEMANGLER is None:  # loaded at the first window's stop, not when diag starts
        _DEMANGLER = _Demangler()
    return _DEMANGLER(name)


def cuda_sync() -> None:
    """Wait for the GPU, as torch.profiler does at stop, so the window's last kernels have ended."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def record_tuple(r: Any, kinds: dict[int, str]) -> tuple[Any, ...] | None:
    """One activity record as a plain tuple (the record's buffer is CUPTI's and is reused).

    (cat, name, start, end, device, stream, correlation, extra) or None for a kind we do not keep.
    """
    cat = kinds.get(int(getattr(r, "kind", -1)))
    if cat is None:
        return None
    g = getattr
    start, end = int(g(r, "start", 0)), int(g(r, "end", 0))
    if start <= 0 or end < start:
        return None  # unfinished at a forced flush: no time to place it at
    if cat == KERNEL:
        extra: dict[str, Any] = {"grid": [g(r, "grid_x", 0), g(r, "grid_y", 0), g(r, "grid_z", 0)],
                                 "block": [g(r, "block_x", 0), g(r, "block_y", 0), g(r, "block_z", 0)],
                                 "registers per thread": g(r, "registers_per_thread", 0)}
        name = str(g(r, "name", "") or "")
    elif cat == MEMCPY:
        name = memcpy_name(int(g(r, "copy_kind", 0)), int(g(r, "src_kind", 0)), int(g(r, "dst_kind", 0)))
        extra = {"bytes": int(g(r, "bytes", 0))}
    else:
        name = memset_name(int(g(r, "memory_kind", 0)))
        extra = {"bytes": int(g(r, "bytes", 0))}
    return (cat, name, start, end, int(g(r, "device_id", -1)),
            int(g(r, "stream_id", -1)), int(g(r, "correlation_id", 0)), extra)


def trace_json(records: list[tuple[Any, ...]], offset_ns: int, base_ns: int,
               meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Kineto-shaped chrome trace of the records; `offset_ns` maps CUPTI time to Unix-epoch ns."""
    events = []
    for cat, name, start, end, device, stream, corr, extra in records:
        ts_ns = start + offset_ns - base_ns
        events.append({"ph": "X", "cat": cat, "name": demangle(name) if cat == KERNEL else name,
                       "pid": device, "tid": stream, "ts": round(ts_ns / 1000, 3),
                       "dur": round(max(0, end - start) / 1000, 3),
                       "args": {"device": device, "stream": stream, "correlation": corr, **extra}})
    events.sort(key=lambda e: e["ts"])
    return {"schemaVersion": 1, "baseTimeNanoseconds": base_ns, "displayTimeUnit": "ms",
            "diag": {"backend": "cupti", **(meta or {})}, "traceEvents": events}


def write_trace(path: str, records: list[tuple[Any, ...]], offset_ns: int, base_ns: int,
                meta: dict[str, Any]) -> None:
    """trace_json of the records, written to `path` whole (a reader never sees half a trace)."""
    try:
        trace = trace_json(records, offset_ns, base_ns, meta)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(trace, f, separators=(",", ":"))
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a lost trace is a missing window, never the program's error
        pass


def clock_offset_ns(api: Any) -> int:
    """Unix-epoch ns minus CUPTI's timestamp, read between two wall-clock reads."""
    before = time.time_ns()
    cupti_now = int(api.get_timestamp())
    after = time.time_ns()
    return (before + after) // 2 - cupti_now


class CuptiWindow:
    """One process's CUPTI Activity windows: `start()`, then `stop(path, finalize)` per window.

    Runs on the program's thread at a step end. `api` is the `cupti.cupti`
    module (injected in tests); it is loaded at the first `start()`.
    """

    name = "cupti"

    def __init__(self, api: Any = None, max_records: int = MAX_RECORDS,
                 sync: Callable[[], None] = cuda_sync) -> None:
        self.api = api
        self.sync = sync
        self.max_records = max_records
        self._records: list[tuple[Any, ...]] = []
        self._dropped = 0
        self._lock = threading.Lock()
        self._kinds: list[Any] = []
        self._categories: dict[int, str] = {}
        self._offsets: list[int] = []
        self._writers: list[threading.Thread] = []
        self.on = False

    def _buffer_requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _buffer_completed(self, activities: Any) -> None:
        # May run on a CUPTI thread: keep plain tuples, never the records themselves.
        kept = []
        for r in activities:
            try:
                t = record_tuple(r, self._categories)
            except Exception:  # noqa: BLE001 - one odd record must not lose the buffer
                continue
            if t is not None:
                kept.append(t)
        with self._lock:
            room = self.max_records - len(self._records)
            self._records.extend(kept[:max(0, room)])
            self._dropped += max(0, len(kept) - max(0, room))

    def prepare(self) -> None:
        """Import cupti-python (~0.2 s on the H200: cuda-bindings, numpy, libcupti) without enabling anything."""
        if self.api is None:
            self.api = load_api()
            learn_enums(self.api)

    def start(self) -> None:
        """Register the buffer callbacks and enable kernel, memcpy and memset activity."""
        self.prepare()
        api = self.api
        kind = api.ActivityKind
        if not self._categories:
            learn_enums(api)
        self._categories = {int(kind.CONCURRENT_KERNEL): KERNEL, int(kind.MEMCPY): MEMCPY, int(kind.MEMSET): MEMSET}
        with self._lock:
            self._records, self._dropped = [], 0
        self._offsets = [clock_offset_ns(api)]
        api.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        self._kinds = []
        self.on = True
        try:
            for k in (kind.CONCURRENT_KERNEL, kind.MEMCPY, kind.MEMSET):
                api.activity_enable(k)
                self._kinds.append(k)
        except Exception:
            self.abort()
            raise

    def _disable(self) -> None:
        api, kinds, self._kinds = self.api, self._kinds, []
        for k in kinds:
            api.activity_disable(k)

    def stop(self, path: str, finalize: bool = True) -> dict[str, Any]:
        """Disable, flush, finalize CUPTI when `finalize`; the trace goes to `path` from a writer thread (wait()).

        Returns what went into the trace: records, dropped, finalized.
        """
        api = self.api
        self.on = False
        try:
            try:
                self.sync()
            except Exception:  # noqa: BLE001 - e.g. another thread captures a graph: keep what has ended
                pass
            self._disable()
            api.activity_flush_all(1)  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: also unfinished buffers
            self._offsets.append(clock_offset_ns(api))
        finally:
            if finalize:
                api.finalize()  # unsubscribes CUPTI: nothing taxes the program's launches after this
        with self._lock:
            records, dropped = self._records, self._dropped
            self._records = []
        offset = sum(self._offsets) // len(self._offsets)
        starts = [r[2] for r in records]
        base = (min(starts) + offset) // 1000 * 1000 if starts else time.time_ns() // 1000 * 1000
        meta = {"records": len(records), "dropped": dropped, "finalized": finalize,
                "clock_offset_ns": offset, "clock_drift_ns": self._offsets[-1] - self._offsets[0]}
        # Turning records into the trace file (~5 µs a record) is done off the program's thread:
        # a window stops at a step end, where every ms is the program's (and, in a multi-rank job,
        # every other rank's, waiting in the next collective). wait() joins it at exit.
        writer = threading.Thread(target=write_trace, args=(path, records, offset, base, meta),
                                  name="diag-window-write", daemon=True)
        writer.start()
        self._writers.append(writer)
        return {"records": len(records), "dropped": dropped, "finalized": finalize}

    def wait(self, timeout_s: float = 5.0) -> None:
        """Let the trace writers finish (at exit), at most `timeout_s` in all."""
        deadline = time.monotonic() + timeout_s
        for writer in self._writers:
            writer.join(max(0.0, deadline - time.monotonic()))

    def abort(self) -> None:
        """Leave CUPTI off after a failure (best effort, never raises)."""
        self.on = False
        for step in (self._disable, lambda: self.api.finalize()):
            try:
                step()
            except Exception:  # noqa: BLE001
                pass
