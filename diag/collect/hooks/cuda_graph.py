"""CUDA graphs and torch.compile: replays are steps, and the run says what is in use.

Installed by the torch hooks (hooks/torch.py) once torch is imported.

- `torch.cuda.CUDAGraph.replay`: an outermost replay is a step (source
  `cuda_graph`), timed like a module call (CUDA events, `gpu_ns`) through the
  recorder's step lifecycle. A replay inside a step (a model wrapper that
  replays in forward, inductor's cudagraph trees inside a compiled module's
  call) is part of that step: only counted. The step is named after the model
  whose forward was captured into the graph (its batch, shapes and dtype too),
  else `CUDAGraph`.
- `capture_begin`/`capture_end`: an `events` row (kind `cuda_graph`, name
  `capture`, `dur_ns` the capture) for each of the first `MAX_EVENTS`
  captures; `recorder.cuda_graphs` is set True at the first capture or replay
  (the kernel windows read it to choose CUPTI teardown).
- `torch.compile`: wrapped to see its arguments; an `events` row (kind
  `compile`, name `torch.compile`, detail `mode`, `backend`, `dynamic`,
  `fullgraph`) per call (the first `MAX_EVENTS`); `recorder.compiled` set True.
- At exit (the recorder's final flush), one `cuda_graph`/`summary` event
  (`captured`, `replays`, `replay_steps`) when graphs were seen, and one
  `compile`/`summary` event with what dynamo exposes, read only if dynamo was
  imported by the program: `graph_breaks`, `recompiles` (guard failures),
  `compile_s` (dynamo's frame compile time, inductor included), a few reasons.
  Every read is guarded: a torch without these internals only loses the facts.
"""

from __future__ import annotations

import functools
import sys
import time
import weakref
from typing import Any

from ...store.steps import BATCH, DTYPE, MODEL, SHAPES, WEIGHT

MAX_EVENTS = 64      # capture / compile events written one by one; the summary counts them all
MAX_REASONS = 3      # graph-break and recompile reasons kept in the summary
REASON_CHARS = 300


def _first_line(text: Any) -> str:
    return str(text).strip().splitlines()[0][:REASON_CHARS] if str(text).strip() else ""


def dynamo_facts(modules: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What torch._dynamo has counted so far, or None when the program never imported it. Never raises."""
    mods = sys.modules if modules is None else modules
    utils = mods.get("torch._dynamo.utils")
    if utils is None:
        return None
    out: dict[str, Any] = {}
    try:
        counters = utils.counters
        breaks = dict(counters.get("graph_break", {}))
        out["graph_breaks"] = int(sum(breaks.values()))
        out["graph_break_reasons"] = [_first_line(r) for r in list(breaks)[:MAX_REASONS]]
        stats = dict(counters.get("stats", {}))
        out["unique_graphs"] = int(stats.get("unique_graphs", 0))
        out["frames"] = int(dict(counters.get("frames", {})).get("total", 0))
    except Exception:  # noqa: BLE001 - another torch version: leave these out
        pass
    try:
        failures = utils.guard_failures
        out["recompiles"] = int(sum(len(v) for v in failures.values()))
        reasons = [r for v in failures.values() for r in v]
        out["recompile_reasons"] = [_first_line(r) for r in reasons[:MAX_REASONS]]
    except Exception:  # noqa: BLE001
        pass
    try:
        times = utils.compilation_time_metrics
        if "_compile.compile_inner" in times:
            out["compile_s"] = float(sum(times["_compile.compile_inner"]))
        else:
            out["compile_s"] = float(utils.calculate_time_spent().get("entire_frame_compile", 0.0))
    except Exception:  # noqa: BLE001
        pass
    return out


def _nothing() -> None:
    """A dead weak reference: no graph is `last_graph()`."""
    return None


class GraphHooks:
    """Counts graphs and replays, makes outermost replays steps, records compile facts."""

    def __init__(self, rec: Any, torch: Any, torch_hooks: Any) -> None:
        self.rec = rec
        self.torch = torch
        self.th = torch_hooks
        self.state = rec.state
        self.captured = 0
        self.replays = 0
        self.replay_steps = 0
        self.compiles = 0
        self.capture_start: dict[int, int] = {}  # id(graph) -> perf counter at capture_begin
        # graph -> (model, batch, shapes, dtype) of the module step captured into it
        self.described: weakref.WeakKeyDictionary[Any, tuple[str, int, Any, str]] = weakref.WeakKeyDictionary()
        self.described_full: weakref.WeakKeyDictionary[Any, tuple[str, int, Any, str, str]] = (
            weakref.WeakKeyDictionary())  # graph -> its replays' full description (_describe)
        self.seen = False  # a graph was captured or replayed (recorder.cuda_graphs)
        self.last_graph: Any = _nothing  # a weak reference to the last graph described, and its description
        self.last_described: tuple[str, int, Any, str, str] = ("CUDAGraph", -1, [], "", "")
        self.describe = self._describe

    # -- install -----------------------------------------------------------------

    def install(self) -> None:
        self.th._try("cuda_graphs", self._install_graph)
        self.th._try("torch.compile", self._install_compile)
        self.rec.flush_hooks.append(self._on_flush)

    def _install_graph(self) -> None:
        Graph = self.torch.cuda.CUDAGraph
        orig_replay, orig_begin, orig_end = Graph.replay, Graph.capture_begin, Graph.capture_end
        state = self.state
        timed_call = self.th.timed_call
        describe = self.describe

        def replay(graph: Any) -> Any:
            self.replays += 1  # every replay; only an outermost one is a step
            if state.depth:
                return orig_replay(graph)
            self.replay_steps += 1
            if not self.seen:
                self._graphs_seen()
            return timed_call("cuda_graph", describe, graph, orig_replay, (graph,), {})

        rec, lock = self.rec, self.th.lock

        def capture_begin(graph: Any, *args: Any, **kwargs: Any) -> Any:
            # A capture in the default (global) mode is invalidated by an event query from any
            # thread: diag's flusher resolving step events once crashed a capture on the H200.
            # Raised under the lock that resolve() holds while it queries, so none is in flight.
            with lock:
                rec.capturing += 1
            try:
                out = orig_begin(graph, *args, **kwargs)
            except BaseException:
                rec.capturing -= 1
                raise
            self._began(graph)
            return out

        def capture_end(graph: Any) -> Any:
            try:
                return orig_end(graph)
            finally:
                rec.capturing = max(0, rec.capturing - 1)
                self._ended(graph)

        for fn, orig in ((replay, orig_replay), (capture_begin, orig_begin), (capture_end, orig_end)):
            functools.update_wrapper(fn, orig)
        Graph.replay, Graph.capture_begin, Graph.capture_end = replay, capture_begin, capture_end

    def _install_compile(self) -> None:
        torch = self.torch
        orig = torch.compile

        @functools.wraps(orig)
        def compile(*args: Any, **kwargs: Any) -> Any:  # noqa: A001 - torch's name
            try:
                self._compiled(kwargs)
            except Exception:  # noqa: BLE001 - never hurt the target
                pass
            return orig(*args, **kwargs)

        torch.compile = compile

    # -- events --------------------------------------------------------------------

    def _graphs_seen(self) -> None:
        self.seen = True
        if not getattr(self.rec, "cuda_graphs", False):
            self.rec.cuda_graphs = True

    def _began(self, graph: Any) -> None:
        try:
            self._graphs_seen()
            self.capture_start[id(graph)] = time.perf_counter_ns()
            self.th.capture_graph = graph  # the module step captured now describes the graph's replays
            self.described_full.pop(graph, None)  # captured (again): described afresh at its next replay
            self.last_graph = _nothing
        except Exception:  # noqa: BLE001
            pass

    def _ended(self, graph: Any) -> None:
        try:
            self.th.capture_graph = None
            self.captured += 1
            t0 = self.capture_start.pop(id(graph), None)
            if self.captured <= MAX_EVENTS:
                dur = 0 if t0 is None else time.perf_counter_ns() - t0
                self.rec.event("cuda_graph", "capture", ts_ns=time.time_ns() - dur, dur_ns=dur, n=self.captured)
        except Exception:  # noqa: BLE001
            pass

    def captured_step(self, graph: Any, row: list[Any]) -> None:
        """A module step ran while `graph` was capturing: its description names the graph's replays."""
        try:
            if row[WEIGHT] and row[MODEL]:
                self.described[graph] = (row[MODEL], row[BATCH], row[SHAPES], row[DTYPE])
        except Exception:  # noqa: BLE001 - a graph type without weak references: replays stay unnamed
            pass

    def _compiled(self, kwargs: dict[str, Any]) -> None:
        self.compiles += 1
        if not getattr(self.rec, "compiled", False):
            self.rec.compiled = True
        if self.compiles <= MAX_EVENTS:
            backend = kwargs.get("backend", "inductor")
            self.rec.event("compile", "torch.compile", mode=kwargs.get("mode") or "default",
                           backend=backend if isinstance(backend, str) else getattr(backend, "__name__", "callable"),
                           dynamic=kwargs.get("dynamic"), fullgraph=bool(kwargs.get("fullgraph", False)))

    def _on_flush(self, final: bool) -> None:
        if not final:
            return
        if self.captured or self.replays:
            self.rec.event("cuda_graph", "summary", captured=self.captured, replays=self.replays,
                           replay_steps=self.replay_steps)
        facts = dynamo_facts()
        if facts is not None and (self.compiles or facts.get("frames")):
            self.rec.event("compile", "summary", compile_calls=self.compiles, **facts)

    # -- replays as steps -------------------------------------------------------------

    def _describe(self, graph: Any, args: tuple, kwargs: Any) -> tuple[str, int, Any, str, str]:
        # A graph replays the same buffers on the device it was captured on: its description
        # is worked out at its first kept replay, then read from `described_full` (no CUDA call).
        if self.last_graph() is graph:  # the common case: one graph replayed step after step
            return self.last_described
        got = self.described_full.get(graph)
        if got is not None:
            self.last_graph, self.last_described = weakref.ref(graph), got
            return got
        device = f"cuda:{self.torch.cuda.current_device()}"
        captured = self.described.get(graph)
        got = ("CUDAGraph", -1, [], "", device) if captured is None else (*captured, device)
        try:
            self.described_full[graph] = got
            self.last_graph, self.last_described = weakref.ref(graph), got
        except TypeError:  # a graph type without weak references: described at every replay
            pass
        return got


def install(rec: Any, torch: Any, torch_hooks: Any) -> GraphHooks:
    """Hook torch.cuda.CUDAGraph and torch.compile (see the module docstring)."""
    hooks = GraphHooks(rec, torch, torch_hooks)
    hooks.install()
    return hooks
