"""onnxruntime hooks: session creation and runs.

Installed by diag.collect.hooks right after the target imports onnxruntime.

- `InferenceSession.__init__` is timed as a `model_load` event (name
  `ort.InferenceSession`, detail: model, bytes), followed by an `ort_session`
  event: providers `requested` vs `got` (`get_providers()`): facts only;
  the analysis decides whether it was a fallback (analysis/runtime.py).
- `InferenceSession.run` and `run_with_iobinding` are steps (source `ort`):
  model path, batch and shapes from the feeds (numpy arrays or OrtValues;
  -1 / `[]` for I/O binding), device = the first provider in use. A run made
  inside a torch step (or another run) is not a step of its own.
  Numbering, sampling, nesting, the first-step event and the callbacks are
  the recorder's step lifecycle (`begin_step`/`end_step`, diag/collect/recorder.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

_time_ns = time.time_ns
_perf_ns = time.perf_counter_ns


def _provider_names(providers: Any) -> list[str] | None:
    if providers is None:
        return None
    names = []
    for p in providers:
        names.append(p[0] if isinstance(p, (tuple, list)) else str(p))
    return names


def _model_name(path_or_bytes: Any) -> tuple[str, int]:
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        try:
            return str(path), os.path.getsize(path)
        except OSError:
            return str(path), -1
    if isinstance(path_or_bytes, (bytes, bytearray)):
        return "<bytes>", len(path_or_bytes)
    return type(path_or_bytes).__name__, -1


def _shape(value: Any) -> tuple[Any, ...] | None:
    shape = getattr(value, "shape", None)
    if callable(shape):  # OrtValue.shape()
        try:
            shape = shape()
        except Exception:  # noqa: BLE001
            return None
    return tuple(shape) if shape is not None else None


def _dtype(value: Any) -> str:
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return str(dtype)
    data_type = getattr(value, "data_type", None)  # OrtValue: 'tensor(float)'
    try:
        return str(data_type()) if callable(data_type) else ""
    except Exception:  # noqa: BLE001
        return ""


class OrtHooks:
    """Wraps InferenceSession's constructor and run methods."""

    def __init__(self, rec: Any, ort: Any) -> None:
        self.rec = rec
        self.ort = ort
        self.state = rec.state

    def install(self) -> None:
        ort, rec = self.ort, self.rec
        try:
            device = ort.get_device()
        except Exception:  # noqa: BLE001
            device = None
        rec.meta(onnxruntime=str(getattr(ort, "__version__", "")), ort_device=device)
        cls = ort.InferenceSession
        self._wrap_init(cls)
        self._wrap_run(cls, "run")
        if hasattr(cls, "run_with_iobinding"):
            self._wrap_run(cls, "run_with_iobinding")

    def _wrap_init(self, cls: Any) -> None:
        orig_init = cls.__init__
        rec = self.rec

        def __init__(self: Any, path_or_bytes: Any, sess_options: Any = None, providers: Any = None,
                     *args: Any, **kwargs: Any) -> None:
            ts = _time_ns()
            t0 = _perf_ns()
            ok = False
            try:
                orig_init(self, path_or_bytes, sess_options, providers, *args, **kwargs)
                ok = True
            finally:
                try:
                    model, nbytes = _model_name(path_or_bytes)
                    rec.event("model_load", "ort.InferenceSession", ts_ns=ts, dur_ns=_perf_ns() - t0,
                              file=model, bytes=nbytes, ok=ok)
                    if ok:
                        got = list(self.get_providers())
                        asked = _provider_names(providers)
                        self._diag_model = model
                        self._diag_device = got[0] if got else ""
                        rec.event("ort_session", model, requested=asked, got=got)
                except Exception as exc:  # noqa: BLE001
                    rec.note("hooks.ort", f"session not described: {exc!r}")

        __init__.__wrapped__ = orig_init  # type: ignore[attr-defined]
        cls.__init__ = __init__

    def _wrap_run(self, cls: Any, method: str) -> None:
        orig = getattr(cls, method)
        state = self.state
        step = self._step
        describe = self._describe_run if method == "run" else self._describe_bound

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if state.depth:
                return orig(self, *args, **kwargs)
            return step(orig, describe, self, args, kwargs)

        run.__wrapped__ = orig  # type: ignore[attr-defined]
        run.__name__ = run.__qualname__ = method
        run.__doc__ = orig.__doc__
        setattr(cls, method, run)

    def _step(self, orig: Any, describe: Any, sess: Any, args: tuple, kwargs: dict) -> Any:
        rec = self.rec
        row = rec.begin_step("ort", describe, sess, args, kwargs)
        try:
            return orig(sess, *args, **kwargs)
        finally:
            rec.end_step(row)

    def _describe_run(self, sess: Any, args: tuple, kwargs: dict) -> tuple[str, int, list[Any], str, str]:
        """(model, batch, shapes, dtype, device) of a kept `run` (Recorder.begin_step): from its feed."""
        shapes: list[Any] = []
        dtype = ""
        feed = args[1] if len(args) > 1 else kwargs.get("input_feed")
        if isinstance(feed, dict):
            for value in list(feed.values())[:8]:
                shape = _shape(value)
                if shape is not None:
                    if not shapes:
                        dtype = _dtype(value)
                    shapes.append(shape)  # tuples: hashable, so the flusher thread caches their text
        first = shapes[0] if shapes else None
        batch = first[0] if first and isinstance(first[0], int) else -1
        return getattr(sess, "_diag_model", "") or "", batch, shapes, dtype, getattr(sess, "_diag_device", "") or ""

    def _describe_bound(self, sess: Any, args: tuple, kwargs: dict) -> tuple[str, int, list[Any], str, str]:
        """A kept `run_with_iobinding`: the binding holds the inputs, so no batch or shapes."""
        return getattr(sess, "_diag_model", "") or "", -1, [], "", getattr(sess, "_diag_device", "") or ""


def install(rec: Any, ort: Any) -> OrtHooks:
    """Hook an imported onnxruntime module (see the module docstring)."""
    hooks = OrtHooks(rec, ort)
    hooks.install()
    return hooks
