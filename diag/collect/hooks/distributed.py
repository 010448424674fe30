"""torch.distributed hooks: collectives timed on the calling thread, the process group recorded.

Installed by diag.collect.hooks when torch imports `torch.distributed.distributed_c10d`
(during `import torch`), before `torch.distributed` copies its names: so
`dist.all_reduce` and `distributed_c10d.all_reduce` are both the wrapper.

- Collectives (`COLLECTIVES`): each outermost call is an `events` row of kind
  `comm`, name the function (`all_reduce`), `dur_ns` the time the calling
  thread spent in it (on NCCL that is the enqueue, on gloo the whole
  exchange), detail `bytes` (the tensors passed), `async` (async_op=True),
  `in_step`. Rows are sampled like GC pauses (`weight`): a TP job makes
  thousands a second. Nested calls (all_gather_object calling all_gather) are
  part of the outer one.
- Async work: `Work.wait()` (the handle an async_op returns) is a `comm` row
  named `wait`, so the time a rank waits for its collectives is counted (a
  blocking collective's own internal wait is part of its row).
- The process's place in the job: a meta row at install (torch's import)
  with `rank`, `local_rank`, `world_size`, `local_world_size`,
  `master_addr`, `elastic_run_id` from the environment torchrun sets
  (`distributed_env`), and one with `dist_backend`, `dist_world_size`,
  `dist_rank` once `init_process_group` returns.

While dynamo traces (torch.compile), every wrapper steps aside. Never hurts the
target: a failure to describe a call loses the row, never the call.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from .torch import compiling_probe

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier", "gather", "scatter",
               "send", "recv", "isend", "irecv", "all_gather_object", "broadcast_object_list")
# Collectives are kept whole for the recorder's `detail_rows` only: a tensor-parallel
# job makes several per step, and a row for each (92k in a 5 s 2-GPU run) cost its
# flusher and the program's thread far more than the figures need; weights keep totals exact.
_perf_ns = time.perf_counter_ns
_time_ns = time.time_ns


# torchrun's (and torch.distributed launchers') environment -> meta key
DIST_ENV = {"RANK": "rank", "LOCAL_RANK": "local_rank", "WORLD_SIZE": "world_size",
            "LOCAL_WORLD_SIZE": "local_world_size", "MASTER_ADDR": "master_addr",
            "TORCHELASTIC_RUN_ID": "elastic_run_id"}
_TEXT_KEYS = ("master_addr", "elastic_run_id")


def distributed_env(environ: Any) -> dict[str, Any]:
    """This process's place in a distributed job, from the environment (empty outside one)."""
    out: dict[str, Any] = {}
    for var, key in DIST_ENV.items():
        value = environ.get(var)
        if value is None:
            continue
        try:
            out[key] = str(value)[:200] if key in _TEXT_KEYS else int(value)
        except ValueError:
            out[key] = str(value)[:200]
    return out


def tensor_bytes(args: tuple, kwargs: dict) -> int:
    """Bytes of the tensors a collective was given (positional and keyword, one level into lists)."""
    total = 0
    for value in (*args[:2], *kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        for t in items[:64]:
            try:
                total += int(t.nelement() * t.element_size())
            except Exception:  # noqa: BLE001 - not a tensor
                pass
    return total


class DistributedHooks:
    """Wraps torch.distributed's Python collectives and Work.wait for one process."""

    def __init__(self, rec: Any, c10d: Any, compiling: Any = None) -> None:
        self.rec = rec
        self.c10d = c10d
        self.local = threading.local()
        self.compiling = compiling or (lambda: False)

    def record(self, name: str, ts: int, dur: int, args: tuple, kwargs: dict) -> None:
        rec = self.rec
        # Inside a kernel window every collective is kept: analysis matches them one to one with
        # the window's NCCL kernels (their sizes); outside, the sampled rows' weights keep totals exact.
        w = 1 if rec.in_window else rec.frequent_weight("comm")
        if not w:
            return
        rec.event("comm", name, ts_ns=ts, dur_ns=dur, weight=w, bytes=tensor_bytes(args, kwargs),
                  async_op=bool(kwargs.get("async_op", False)), in_step=rec.state.depth > 0)

    def wrap(self, name: str, orig: Any) -> Any:
        local, record, compiling = self.local, self.record, self.compiling

        def collective(*args: Any, **kwargs: Any) -> Any:
            if getattr(local, "busy", False) or compiling():
                return orig(*args, **kwargs)
            local.busy = True
            ts, t0 = _time_ns(), _perf_ns()
            try:
                return orig(*args, **kwargs)
            finally:
                dur = _perf_ns() - t0
                local.busy = False
                try:
                    record(name, ts, dur, args, kwargs)
                except Exception:  # noqa: BLE001 - never hurt the target
                    pass

        collective.__wrapped__ = orig  # type: ignore[attr-defined]
        collective._diag_hook = True  # type: ignore[attr-defined]
        collective.__name__ = collective.__qualname__ = name
        collective.__doc__ = getattr(orig, "__doc__", None)
        return collective

    def install(self) -> None:
        c10d, rec = self.c10d, self.rec
        for name in COLLECTIVES:
            orig = getattr(c10d, name, None)
            if callable(orig) and not getattr(orig, "_diag_hook", False):  # c10d's own decorators set __wrapped__
                setattr(c10d, name, self.wrap(name, orig))
        self._install_wait()
        self._install_init()
        rec.meta(dist_hooks=True, **distributed_env(os.environ))

    def _install_wait(self) -> None:
        work = getattr(self.c10d, "Work", None)
        orig = getattr(work, "wait", None)
        if orig is None:
            return
        record, compiling = self.record, self.compiling

        local = self.local

        def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(local, "busy", False) or compiling():  # a blocking collective's own wait: part of it
                return orig(self, *args, **kwargs)
            ts, t0 = _time_ns(), _perf_ns()
            try:
                return orig(self, *args, **kwargs)
            finally:
                try:
                    record("wait", ts, _perf_ns() - t0, (), {})
                except Exception:  # noqa: BLE001
                    pass

        wait.__wrapped__ = orig  # type: ignore[attr-defined]
        try:
            work.wait = wait
        except (TypeError, AttributeError) as exc:
            self.rec.note("hooks.distributed.wait", f"Work.wait not hooked: {exc!r}")

    def _install_init(self) -> None:
        c10d, rec = self.c10d, self.rec
        orig = getattr(c10d, "init_process_group", None)
        if orig is None:
            return

        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            try:
                rec.meta(dist_backend=str(c10d.get_backend()), dist_world_size=int(c10d.get_world_size()),
                         dist_rank=int(c10d.get_rank()))
            except Exception:  # noqa: BLE001 - the group exists; describing it is ours to lose
                pass
            return out

        init_process_group.__wrapped__ = orig  # type: ignore[attr-defined]
        init_process_group.__doc__ = orig.__doc__
        c10d.init_process_group = init_process_group


class _LazyCompiling:
    """torch's "is dynamo tracing?" probe, looked up at the first call: c10d loads while torch is half imported."""

    def __init__(self) -> None:
        self.probe: Any = None

    def __call__(self) -> bool:
        if self.probe is None:
            import sys

            torch = sys.modules.get("torch")
            if torch is None or not hasattr(torch, "compiler"):
                return False  # torch still importing: nothing can be tracing yet
            self.probe = compiling_probe(torch)
        return bool(self.probe())


def install(rec: Any, c10d: Any) -> DistributedHooks:
    """Hook an imported torch.distributed.distributed_c10d module (see the module docstring)."""
    hooks = DistributedHooks(rec, c10d, _LazyCompiling())
    hooks.install()
    return hooks
