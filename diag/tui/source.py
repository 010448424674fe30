"""What the TUI reads: a data source object, so tests can hand it canned data.

No Textual here. `RunSource` wraps a recorded run: the manifest, the
Diagnosis, and the view-facing series and tables from diag.analysis. Every
getter is cached, with a lock per result, because view loaders run in worker
threads: two views asking for the diagnosis compute it once, while a view
that does not need it (Latency, Kernels, Run) never waits behind it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import Any, Protocol, TypeVar

import pandas as pd

from diag.engine.diagnosis import Diagnosis
from diag.store.importers import open_any
from diag.store.run import Run

T = TypeVar("T")


class Source(Protocol):
    """Everything the views display. Implemented by RunSource; tests may fake it."""

    @property
    def manifest(self) -> dict[str, Any]: ...
    @property
    def duration_s(self) -> float: ...
    def diagnosis(self) -> Diagnosis: ...
    def timeline(self, max_points: int = 2000) -> list[Any]: ...
    def latency_summary(self) -> pd.DataFrame: ...
    def latency_values(self, kind: str) -> Any: ...
    def slowest(self, kind: str, n: int = 20) -> pd.DataFrame: ...
    def queue_vs_service(self) -> pd.DataFrame: ...
    def hot_frames(self, phases: list[Any], n: int = 30) -> pd.DataFrame: ...
    def kernel_summary(self, n: int = 30) -> pd.DataFrame: ...
    def kernel_categories(self) -> pd.DataFrame: ...
    def memcpy_kinds(self) -> pd.DataFrame: ...


def _cached(fn: Callable[..., T]) -> Callable[..., T]:
    """Cache a method's result per arguments, under the source's lock."""

    @wraps(fn)
    def wrapper(self: RunSource, *args: Any) -> T:
        key = (fn.__name__, *(_hashable(a) for a in args))
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._cache:
                self._cache[key] = fn(self, *args)
            return self._cache[key]

    return wrapper


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return repr(value)
    return value


class RunSource:
    """A recorded run as the TUI sees it. `diagnosis` may be given (tests, --tui after analyze)."""

    def __init__(self, run: Run, diagnosis: Diagnosis | None = None, rule_dirs: tuple[str, ...] = ()) -> None:
        self.run = run
        self._diagnosis = diagnosis
        self._rule_dirs = rule_dirs
        self._lock = threading.Lock()  # guards _locks only
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._cache: dict[tuple[Any, ...], Any] = {}

    @classmethod
    def open(cls, path: str, diagnosis: Diagnosis | None = None, rule_dirs: tuple[str, ...] = ()) -> RunSource:
        """Open the run (or trace) at `path`; raises DiagError when it is missing or not a run."""
        return cls(open_any(path), diagnosis, rule_dirs)

    @property
    def manifest(self) -> dict[str, Any]:
        return self.run.manifest

    @property
    def duration_s(self) -> float:
        return self.run.duration_s

    def diagnosis(self) -> Diagnosis:
        if self._diagnosis is None:
            self._diagnosis = self._diagnose()
        return self._diagnosis

    @_cached
    def _diagnose(self) -> Diagnosis:
        from diag.engine import diagnose

        return diagnose(self.run, rule_dirs=self._rule_dirs)

    @_cached
    def timeline(self, max_points: int = 2000) -> list[Any]:
        from diag.analysis import series

        return series.timeline(self.run, max_points=max_points)

    @_cached
    def latency_summary(self) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.latency_summary(self.run)

    @_cached
    def latency_values(self, kind: str) -> Any:
        from diag.analysis import tables

        return tables.latency_values(self.run, kind)

    @_cached
    def slowest(self, kind: str, n: int = 20) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.slowest(self.run, kind, n)

    @_cached
    def queue_vs_service(self) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.queue_vs_service(self.run)

    @_cached
    def hot_frames(self, phases: list[Any], n: int = 30) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.hot_frames(self.run, phases, n)

    @_cached
    def kernel_summary(self, n: int = 30) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.kernel_summary(self.run, n)

    @_cached
    def kernel_categories(self) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.kernel_categories(self.run)

    @_cached
    def memcpy_kinds(self) -> pd.DataFrame:
        from diag.analysis import tables

        return tables.memcpy_kinds(self.run)
