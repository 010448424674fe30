"""torch hooks: steps, copies, syncs, torch.load and torch.cuda.nvtx ranges.

Installed by diag.collect.hooks right after the target imports torch.

- Steps: `torch.nn.Module.__call__` is replaced by a thin wrapper. Only the
  OUTERMOST module call of a thread is a step; a nested call costs one
  thread-local read and goes straight to the original (no global forward
  hooks, so torch keeps its fast path). On CUDA, a `torch.cuda.Event` pair is
  recorded around the step without synchronizing; the pair is resolved later
  with `Event.query()` (on later steps, by the flusher; at exit polled for at most 2 s, never a
  blocking synchronize: a GPU stuck in a collective must not hold the exit)
  and the step row is written then with `gpu_ns` (span from the step's first
  to its last GPU work on the current stream). Steps are timed with events for
  the first `cuda_event_all` CUDA steps, then 1 in `cuda_event_every`, or
  fewer so that at most `MAX_TIMED_PER_S` steps a second are timed (a fast
  loop would pay its CUDA calls every few steps); others have `gpu_ns = -1`. No events while a CUDA graph is being captured.
- Kernel windows (diag/collect/kernel_windows.py) are installed here, once
  torch is imported, when the option `kernel_windows` is > 0; they are driven
  by the recorder's step lifecycle (`begin_step`/`end_step`, see
  diag/collect/recorder.py), like every framework's steps.
- Copies: `Tensor.to`, `Tensor.cuda`, `Tensor.cpu`, `Tensor.copy_`; only real
  cross-device copies (CPU<->CUDA, or between two GPUs) become rows. A
  blocking device-to-host copy is also a sync (api `Tensor.to`, `Tensor.cpu`,
  `Tensor.copy_`).
- Syncs: `torch.cuda.synchronize`, `Tensor.item` / `Tensor.tolist` on CUDA
  tensors, `torch.cuda.Event.synchronize`, `torch.cuda.Stream.synchronize`.
- `torch.load`: a `model_load` event with the file and its size.
- `torch.cuda.nvtx.range_push/range_pop/range_start/range_end` (and so
  `torch.cuda.nvtx.range`, which calls them) become ranges with source
  `torch.cuda.nvtx`; `mark` becomes a `mark` event. The originals are always
  called, so Nsight Systems still sees them.
- CUDA graphs and torch.compile (hooks/cuda_graph.py): an outermost
  `CUDAGraph.replay()` is a step (source `cuda_graph`) timed the same way
  (`timed_call`); captures, compile arguments and dynamo's counters are events.
Compiled code (torch.compile) bypasses these Python entry points inside its
graphs; the outermost call of a compiled module is still one step. While
dynamo traces a model, every wrapper here steps aside (`compiling()` is
folded to True in the trace): a wrapper that did work there would add graph
breaks to the program (seen on the H200: 6 breaks in a compiled ranker).
"""

from __future__ import annotations

import atexit
import collections
import functools
import os
import threading
import time
from typing import Any

from ...store.steps import DEVICE, GPU_NS, WEIGHT

_time_ns = time.time_ns
_perf_ns = time.perf_counter_ns
MAX_TIMED_PER_S = 50  # CUDA-event-timed steps per second, at most (after the first cuda_event_all)
RETUNE_STEPS = 512     # steps between two looks at the step rate
_MAX_SHAPES = 8
_MAX_PENDING = 256  # CUDA event pairs waiting to complete
_EXIT_WAIT_S = 2.0  # at exit, queued GPU work gets this long to finish (resolve)


def _tensors(args: tuple, kwargs: dict, tensor_type: type) -> list[Any]:
    """Tensor inputs: positional, keyword, and one level into lists/tuples/dicts."""
    found: list[Any] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, tensor_type):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value[:_MAX_SHAPES] if isinstance(v, tensor_type))
        elif isinstance(value, dict):
            found.extend(v for v in list(value.values())[:_MAX_SHAPES] if isinstance(v, tensor_type))
        if len(found) >= _MAX_SHAPES:
            break
    return found[:_MAX_SHAPES]


_DTYPE_NAMES: dict[Any, str] = {}
_CUDA_NAMES = [f"cuda:{i}" for i in range(64)]
_CUDA_INDEX = {name: i for i, name in enumerate(_CUDA_NAMES)}  # a step's device -> its index, no parsing


def _non_blocking(args: tuple, kwargs: dict) -> bool:
    # In every Tensor.to / .cuda signature the first positional bool is non_blocking.
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    for a in args:
        if isinstance(a, bool):
            return a
    return False


def _nbytes(t: Any) -> int:
    try:
        return int(t.nelement() * t.element_size())
    except Exception:  # noqa: BLE001
        return -1


def _pinned(t: Any) -> bool | None:
    try:
        return bool(t.is_pinned())
    except Exception:  # noqa: BLE001
        return None


def _file_info(f: Any) -> dict[str, Any]:
    try:
        if isinstance(f, (str, os.PathLike)):
            path = os.fspath(f)
            return {"file": str(path), "bytes": os.path.getsize(path)}
        name = getattr(f, "name", None) or type(f).__name__
        try:
            size = os.fstat(f.fileno()).st_size
        except Exception:  # noqa: BLE001 - BytesIO and friends
            size = f.getbuffer().nbytes if hasattr(f, "getbuffer") else -1
        return {"file": str(name), "bytes": size}
    except Exception:  # noqa: BLE001
        return {"file": "?", "bytes": -1}


class TorchHooks:
    """Holds the originals and the per-process state of the torch hooks."""

    def __init__(self, rec: Any, torch: Any) -> None:
        self.rec = rec
        self.torch = torch
        self.state = rec.state
        self.opts = rec.options
        self.pending: collections.deque[tuple[list[Any], Any, Any, int]] = collections.deque()
        self.free_events: dict[int, list[tuple[Any, Any]]] = {}  # per device index
        self.event_sync: Any = None  # the real Event.synchronize (ours would count as a sync)
        self.lock = threading.Lock()
        self.exit_wait_s = _EXIT_WAIT_S
        self.cuda_steps = 0
        # CUDA-event timing: every step of the first `event_all`, then 1 in `event_every` (read once here).
        self.cuda_events = bool(self.opts.get("cuda_events", True))
        self.event_all = int(self.opts.get("cuda_event_all", 64))
        self.event_every = max(1, int(self.opts.get("cuda_event_every", 4)))
        self.base_every = self.event_every
        self.retune_n, self.retune_t = 0, 0  # step count and time when event_every was last set
        self.tracing = getattr(getattr(torch, "_C", None), "_get_tracing_state", None)
        self.tensor_type = torch.Tensor
        self.describe = self._describe  # bound once: the step path passes it on every step
        self.nvtx_local = threading.local()
        self.nvtx_started: dict[Any, tuple[str, int, int]] = {}
        self.graphs: Any = None          # the CUDA-graph / torch.compile hooks (hooks/cuda_graph.py)
        self.capture_graph: Any = None   # the CUDA graph being captured now, if any

    # -- install ---------------------------------------------------------------

    def install(self) -> None:
        torch, rec = self.torch, self.rec
        rec.meta(torch=str(torch.__version__), cuda_runtime=getattr(torch.version, "cuda", None),
                 hip=getattr(torch.version, "hip", None))
        self._try("steps", self._install_steps)
        if self.opts.get("copies", True):
            self._try("copies", self._install_copies)
        if self.opts.get("syncs", True):
            self._try("syncs", self._install_syncs)
        self._try("torch.load", self._install_load)
        if self.opts.get("nvtx", True):
            self._try("torch.cuda.nvtx", self._install_nvtx)
        self._try("cuda_graphs", self._install_graphs)
        rec.flush_hooks.append(lambda final: self.resolve(block=final))
        if self.opts.get("kernel_windows"):
            self._try("kernel_windows", self._install_kernel_windows)
        atexit.register(self.resolve, True)  # after torch's own import: runs before CUDA teardown
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_child)

    def _install_graphs(self) -> None:
        from . import cuda_graph

        self.graphs = cuda_graph.install(self.rec, self.torch, self)

    def _install_kernel_windows(self) -> None:
        from .. import kernel_windows

        kernel_windows.install(self.rec)  # notes its own reasons when it cannot run

    def _try(self, what: str, fn: Any) -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - a torch version without this entry point
            self.rec.note(f"hooks.torch.{what}", f"not hooked: {exc!r}")

    def _after_fork_child(self) -> None:
        self.pending = collections.deque()
        self.free_events = {}
        self.lock = threading.Lock()

    # -- steps -----------------------------------------------------------------

    def _install_steps(self) -> None:
        Module = self.torch.nn.Module
        orig_call = Module.__call__
        state = self.state
        step = self._step
        compiling = compiling_probe(self.torch)

        if orig_call is getattr(Module, "_wrapped_call_impl", None) and hasattr(Module, "_call_impl"):
            # Nested calls skip one frame: this is what _wrapped_call_impl does
            # (torch 2.1+), so a nested call costs about one thread-local read.
            def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
                call = self._compiled_call_impl
                if call is None:
                    call = self._call_impl
                if state.depth or compiling():
                    return call(*args, **kwargs)
                return step(call, self, args, kwargs)
        else:
            def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
                if state.depth or compiling():
                    return orig_call(self, *args, **kwargs)
                return step(functools.partial(orig_call, self), self, args, kwargs)

        __call__.__wrapped__ = orig_call  # type: ignore[attr-defined]
        __call__.__qualname__ = "Module.__call__"
        Module.__call__ = __call__

    def _step(self, call: Any, mod: Any, args: tuple, kwargs: dict) -> Any:
        """One outermost module call; `call` is the module's own call (bound)."""
        if self.tracing is not None and self.tracing() is not None:
            return call(*args, **kwargs)  # torch.jit.trace running the model: not inference
        return self.timed_call("torch", self.describe, mod, call, args, kwargs)

    def timed_call(self, source: str, describe: Any, subject: Any, call: Any, args: tuple, kwargs: dict) -> Any:
        """`call(*args, **kwargs)` as a step of `subject` (module, CUDA graph), GPU-timed with CUDA events."""
        rec = self.rec
        row = rec.begin_step(source, describe, subject, args, kwargs)
        if row is not None and self.capture_graph is not None and self.graphs is not None:
            self.graphs.captured_step(self.capture_graph, row)  # this step's description names the graph
        events = None
        if row is not None and row[WEIGHT] and self.cuda_events:
            try:
                device = row[DEVICE]
                index = _CUDA_INDEX.get(device)
                if index is None and device[:5] == "cuda:":
                    index = int(device[5:])
                if index is not None or device == "cuda" or (device == "" and self._cuda_initialized()):
                    n = self.cuda_steps  # _start_events' schedule, inlined: 3 steps in 4 stop here
                    self.cuda_steps = n + 1
                    if n < self.event_all or not n % self.event_every:
                        events = self._record_start(index)
                    if events is not None:
                        rec.restart_clock(row)  # recording the event is diag's time, not the step's
            except Exception:  # noqa: BLE001 - never hurt the target: the step is just not GPU-timed
                events = None
        try:
            return call(*args, **kwargs)
        finally:
            if events is None:
                rec.end_step(row)
            else:
                rec.end_step(row, self._await_gpu, events)

    def _device_name(self, t: Any) -> str:
        if t.is_cuda:
            return _CUDA_NAMES[t.get_device()] if t.get_device() < len(_CUDA_NAMES) else str(t.device)
        return "cpu" if t.is_cpu else str(t.device)

    def _describe(self, mod: Any, args: tuple, kwargs: dict) -> tuple[str, int, list[Any], str, str]:
        """(model, batch, shapes, dtype, device) of a kept step (Recorder.begin_step)."""
        tensors = _tensors(args, kwargs, self.tensor_type)
        if tensors:
            first = tensors[0]
            shape = first.shape
            batch = int(shape[0]) if len(shape) else -1
            dtype = _DTYPE_NAMES.get(first.dtype) or _DTYPE_NAMES.setdefault(
                first.dtype, str(first.dtype).replace("torch.", ""))
            device = self._device_name(first)
        else:
            batch, dtype, device = -1, "", ""
            for p in mod.parameters():
                device = self._device_name(p)
                break
        model = type(mod).__name__
        if model == "OptimizedModule":  # torch.compile's wrapper: name the model it compiled
            model = type(mod._modules.get("_orig_mod", mod)).__name__
        # Shapes stay torch.Size objects: the flusher thread turns them into text.
        return model, batch, [t.shape for t in tensors], dtype, device

    def _await_gpu(self, row: list[Any], events: tuple[Any, Any, Any, int]) -> None:
        """A finished step timed with CUDA events: written by resolve() once its end event completes."""
        start, end, stream, index = events
        end.record(stream)
        with self.lock:
            self.pending.append((row, start, end, index))
        self.resolve()

    def _cuda_initialized(self) -> bool:
        try:
            return bool(self.torch.cuda.is_initialized())
        except Exception:  # noqa: BLE001
            return False

    def _start_events(self, index: int | None) -> tuple[Any, Any, Any, int] | None:
        """A start event recorded now on the step's device, and its end event; None when not timed."""
        n = self.cuda_steps
        self.cuda_steps = n + 1
        if n >= self.event_all and n % self.event_every:
            return None
        return self._record_start(index)

    def _retune(self) -> None:
        """Time at most ~MAX_TIMED_PER_S steps a second: each timed step costs several CUDA calls
        (~10-30 µs on the H200 host), 4% of a 280 µs graph replay when 1 in 4 is timed, ~0.1% at 50 a second."""
        n, now = self.cuda_steps, _perf_ns()
        if self.retune_t:
            rate = (n - self.retune_n) * 1e9 / max(1, now - self.retune_t)
            self.event_every = max(self.base_every, int(rate / MAX_TIMED_PER_S))
        self.retune_n, self.retune_t = n, now

    def _record_start(self, index: int | None) -> tuple[Any, Any, Any, int] | None:
        """_start_events for a step the schedule times."""
        if self.cuda_steps - self.retune_n >= RETUNE_STEPS:
            self._retune()
        cuda = self.torch.cuda
        if getattr(self.rec, "capturing", 0) or cuda.is_current_stream_capturing():
            return None  # an event recorded into a CUDA graph capture cannot be queried
        if index is None:
            index = cuda.current_device()
        stream = cuda.current_stream(index)
        pool = self.free_events.get(index)
        pair = pool.pop() if pool else (cuda.Event(enable_timing=True), cuda.Event(enable_timing=True))
        pair[0].record(stream)
        return pair[0], pair[1], stream, index

    def resolve(self, block: bool = False) -> None:
        """Write the step rows whose CUDA events have completed; `block` (at exit): wait for the rest,
        polling `query()` for at most `exit_wait_s`, then write them with gpu_ns -1. Never a blocking
        synchronize: a rank whose GPU is stuck in a collective must still exit (issue 17)."""
        if not self.pending:
            return
        deadline = 0.0  # set at the first wait: the per-step call (block False) pays nothing for it
        if not self.lock.acquire(timeout=self.exit_wait_s if block else -1):
            return  # at exit, another thread holds it: its rows stay unwritten, the exit goes on
        try:
            if getattr(self.rec, "capturing", 0):
                return  # a graph capture (any thread) would be invalidated by a query: next time
            while self.pending:
                row, start, end, index = self.pending[0]
                try:
                    if len(self.pending) > _MAX_PENDING:
                        raise TimeoutError  # too far behind: give up on the oldest
                    if not end.query():
                        if not block:
                            break
                        deadline = deadline or time.monotonic() + self.exit_wait_s
                        while not end.query():
                            if time.monotonic() >= deadline:
                                raise TimeoutError
                            time.sleep(0.002)
                    row[GPU_NS] = int(start.elapsed_time(end) * 1e6)
                    self.free_events.setdefault(index, []).append((start, end))
                except Exception:  # noqa: BLE001 - not completed in time or CUDA gone: unknown
                    row[GPU_NS] = -1
                self.pending.popleft()
                self.rec.step(row)
        finally:
            self.lock.release()

    # -- copies and syncs ---------------------------------------------------------

    def _copy(self, api: str, src: Any, dst: Any, args: tuple, kwargs: dict, t0: int) -> None:
        """Record src -> dst if it crossed devices (and a sync for a blocking d2h).

        Most calls are same-device casts: they leave at the first test, and the
        costlier questions (pinned? non_blocking?) are asked only for a kept row.
        """
        dur = _perf_ns() - t0
        src_cuda, dst_cuda = src.is_cuda, dst.is_cuda
        if src_cuda == dst_cuda and (not src_cuda or src.get_device() == dst.get_device()):
            return
        direction = "h2d" if dst_cuda and not src_cuda else "d2h" if src_cuda and not dst_cuda else "d2d"
        w = self.rec.frequent_weight("copies")
        if not w and direction != "d2h":
            return
        ts = _time_ns() - dur
        non_blocking = _non_blocking(args, kwargs)
        if w:
            host = src if direction == "h2d" else dst if direction == "d2h" else None
            self.rec.write("copies", {
                "ts_ns": ts, "dur_ns": dur, "tid": self.rec.tid(), "api": api, "direction": direction,
                "bytes": _nbytes(dst), "pinned": None if host is None else _pinned(host),
                "non_blocking": bool(non_blocking), "in_step": self.state.depth > 0, "weight": w})
        if direction == "d2h" and not non_blocking:
            self.rec.sync(f"Tensor.{api}", ts, dur)

    def _install_copies(self) -> None:
        Tensor = self.torch.Tensor
        copy = self._copy
        compiling = compiling_probe(self.torch)

        def wrap_move(api: str) -> None:
            orig = getattr(Tensor, api)

            def moved(self: Any, *args: Any, **kwargs: Any) -> Any:
                if compiling():
                    return orig(self, *args, **kwargs)
                t0 = _perf_ns()
                out = orig(self, *args, **kwargs)
                if out is not self and (self.is_cuda or out.is_cuda):
                    try:
                        copy(api, self, out, args, kwargs, t0)
                    except Exception:  # noqa: BLE001
                        pass
                return out

            moved.__wrapped__ = orig  # type: ignore[attr-defined]
            moved.__name__ = moved.__qualname__ = api
            setattr(Tensor, api, moved)

        for api in ("to", "cuda", "cpu"):
            wrap_move(api)

        orig_copy = Tensor.copy_

        def copy_(self: Any, src: Any, *args: Any, **kwargs: Any) -> Any:
            # A same-device copy (static CUDA-graph inputs, casts) is no row: it leaves before any
            # timing. The device tests are plain tensor reads, fine inside a dynamo trace too.
            if not isinstance(src, Tensor):
                return orig_copy(self, src, *args, **kwargs)
            dst_cuda, src_cuda = self.is_cuda, src.is_cuda
            if (dst_cuda == src_cuda and (not dst_cuda or self.get_device() == src.get_device())) or compiling():
                return orig_copy(self, src, *args, **kwargs)
            t0 = _perf_ns()
            out = orig_copy(self, src, *args, **kwargs)
            try:
                copy("copy_", src, self, args, kwargs, t0)
            except Exception:  # noqa: BLE001
                pass
            return out

        copy_.__wrapped__ = orig_copy  # type: ignore[attr-defined]
        Tensor.copy_ = copy_

    def _install_syncs(self) -> None:
        torch = self.torch
        sync_weight, sync_row = self.rec.sync_weight, self.rec.sync_row
        compiling = compiling_probe(torch)

        def timed(api: str, orig: Any) -> Any:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if compiling():
                    return orig(*args, **kwargs)
                w = sync_weight()  # counted now; a sampled-away sync is not timed
                if not w:
                    return orig(*args, **kwargs)
                ts = _time_ns()
                t0 = _perf_ns()
                try:
                    return orig(*args, **kwargs)
                finally:
                    sync_row(api, ts, _perf_ns() - t0, w)

            return _named(wrapper, api, orig)

        def timed_cuda_method(api: str, orig: Any) -> Any:
            # Tensor.item / .tolist: called on CPU tensors all the time, and once a step on CUDA
            # (ranker_graph reads its score back): one attribute test for the first.
            def method(self: Any) -> Any:
                if not self.is_cuda or compiling():
                    return orig(self)
                w = sync_weight()
                if not w:
                    return orig(self)
                ts = _time_ns()
                t0 = _perf_ns()
                try:
                    return orig(self)
                finally:
                    sync_row(api, ts, _perf_ns() - t0, w)

            return _named(method, api, orig)

        torch.cuda.synchronize = timed("torch.cuda.synchronize", torch.cuda.synchronize)
        torch.Tensor.item = timed_cuda_method("Tensor.item", torch.Tensor.item)
        torch.Tensor.tolist = timed_cuda_method("Tensor.tolist", torch.Tensor.tolist)
        self.event_sync = torch.cuda.Event.synchronize
        torch.cuda.Event.synchronize = timed("Event.synchronize", torch.cuda.Event.synchronize)
        torch.cuda.Stream.synchronize = timed("Stream.synchronize", torch.cuda.Stream.synchronize)

    # -- model loading --------------------------------------------------------------

    def _install_load(self) -> None:
        torch, rec = self.torch, self.rec
        orig_load = torch.load

        def load(f: Any, *args: Any, **kwargs: Any) -> Any:
            ts = _time_ns()
            t0 = _perf_ns()
            try:
                return orig_load(f, *args, **kwargs)
            finally:
                try:
                    rec.event("model_load", "torch.load", ts_ns=ts, dur_ns=_perf_ns() - t0, **_file_info(f))
                except Exception:  # noqa: BLE001
                    pass

        load.__wrapped__ = orig_load  # type: ignore[attr-defined]
        load.__doc__ = orig_load.__doc__
        torch.load = load

    # -- torch.cuda.nvtx ----------------------------------------------------------------

    def _stack(self) -> list[tuple[str, int, int]]:
        stack = getattr(self.nvtx_local, "stack", None)
        if stack is None:
            stack = self.nvtx_local.stack = []
        return stack

    def _install_nvtx(self) -> None:
        nvtx = self.torch.cuda.nvtx
        rec, state = self.rec, self.state
        orig_push, orig_pop = nvtx.range_push, nvtx.range_pop
        orig_start, orig_end, orig_mark = nvtx.range_start, nvtx.range_end, nvtx.mark
        started = self.nvtx_started

        def range_push(msg: Any) -> Any:
            stack = self._stack()
            stack.append((str(msg), _time_ns(), state.range_depth))
            state.range_depth += 1
            try:
                return orig_push(msg)
            except BaseException:
                stack.pop()
                state.range_depth -= 1
                raise

        def range_pop() -> Any:
            out = orig_pop()
            stack = self._stack()
            if stack:
                name, ts, depth = stack.pop()
                state.range_depth = depth
                rec.range(name, ts, _time_ns() - ts, source="torch.cuda.nvtx", depth=depth)
            return out

        def range_start(msg: Any) -> Any:
            rid = orig_start(msg)
            started[rid] = (str(msg), _time_ns(), rec.tid())
            return rid

        def range_end(range_id: Any) -> Any:
            out = orig_end(range_id)
            got = started.pop(range_id, None)
            if got is not None:
                rec.range(got[0], got[1], _time_ns() - got[1], source="torch.cuda.nvtx", depth=0)
            return out

        def mark(msg: Any) -> Any:
            out = orig_mark(msg)
            rec.event("mark", str(msg), source="torch.cuda.nvtx")
            return out

        for fn, orig in ((range_push, orig_push), (range_pop, orig_pop), (range_start, orig_start),
                         (range_end, orig_end), (mark, orig_mark)):
            fn.__wrapped__ = orig  # type: ignore[attr-defined]
            fn.__doc__ = orig.__doc__
            setattr(nvtx, orig.__name__, fn)


def _named(wrapper: Any, api: str, orig: Any) -> Any:
    """`wrapper` dressed as `orig` (name, doc, `__wrapped__`)."""
    wrapper.__wrapped__ = orig
    wrapper.__name__ = wrapper.__qualname__ = api.rsplit(".", 1)[-1]
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    return wrapper


def compiling_probe(torch: Any) -> Any:
    """torch's "is dynamo tracing this code?" function, or one that always says no (old torch)."""
    compiler = getattr(torch, "compiler", None)
    probe = getattr(compiler, "is_compiling", None)
    if probe is None:
        probe = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return probe if callable(probe) else (lambda: False)


def install(rec: Any, torch: Any) -> TorchHooks:
    """Hook an imported torch module (see the module docstring)."""
    hooks = TorchHooks(rec, torch)
    hooks.install()
    return hooks
