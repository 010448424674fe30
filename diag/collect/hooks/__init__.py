"""In-process hooks, activated lazily when the target imports their library.

`install_import_hooks(rec)` puts a finder first on `sys.meta_path`. It never
imports torch, onnxruntime or nvtx itself: when the target imports one of
them, the finder lets the real finders locate it, wraps the loader for that
one import to time it (an `import` event for torch and onnxruntime), then
installs the matching hooks module (`hooks/torch.py`, `hooks/ort.py`,
`hooks/nvtx.py`; for servers and `generate()`, `hooks/asgi.py`, `hooks/wsgi.py`,
`hooks/generate.py`, watched by submodule name) on the freshly executed module. A hook that fails to install
becomes a `note` event; the import itself always goes on unchanged.
"""

from __future__ import annotations

import sys
import time
from typing import Any

# top-level module -> (hooks module, option that turns it on, record an import event).
# Relative names: in a target, diag's code runs under a private package name (bootstrap).
WATCHED: dict[str, tuple[str, str, bool]] = {
    "torch": (".torch", "torch", True),
    "onnxruntime": (".ort", "onnxruntime", True),
    "nvtx": (".nvtx", "nvtx", False),
    "torch.distributed.distributed_c10d": (".distributed", "distributed", False),  # collectives, process group
    # Servers and generation loops: requests found with no code change (asgi.py, wsgi.py,
    # generate.py). Submodules are watched by their full name: each hooks module's
    # INSTALLERS says what it patches there.
    **{name: (".asgi", "serving", False) for name in (
        "uvicorn.config", "uvicorn.server", "uvicorn.supervisors.multiprocess",
        "uvicorn.protocols.http.h11_impl", "uvicorn.protocols.http.httptools_impl",
        "uvicorn.protocols.http.zttp_impl", "uvicorn.protocols.http.zttp_h2_impl",
        "starlette.applications")},
    **{name: (".wsgi", "serving", False) for name in (
        "gunicorn.workers.base", "gunicorn.workers.sync", "gunicorn.workers.gthread", "gunicorn.arbiter",
        "flask.app")},
    "transformers.generation.utils": (".generate", "generate", False),
}


def activate(rec: Any, name: str, module: Any) -> None:
    """Install the hooks for an imported library. Never raises."""
    hooks_name, option, _ = WATCHED[name]
    if not rec.options.get(option, True):
        return
    try:
        import importlib

        hooks = importlib.import_module(hooks_name, __package__)
        installers = getattr(hooks, "INSTALLERS", None)  # a hooks module that patches several submodules
        (installers[name] if installers is not None else hooks.install)(rec, module)
    except Exception as exc:  # noqa: BLE001 - never hurt the target
        rec.note(f"hooks.{name}", f"{name} hooks not installed: {exc!r}")


class _TimedLoader:
    """Wraps the real loader for one import; everything else is passed through."""

    def __init__(self, loader: Any, name: str, finder: _Finder) -> None:
        self._loader = loader
        self._name = name
        self._finder = finder

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        # Put the real loader back first, so nothing of ours stays visible.
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        start = time.time_ns()
        t0 = time.perf_counter_ns()
        self._loader.exec_module(module)
        self._finder.loaded(self._name, module, start, time.perf_counter_ns() - t0)


class _Finder:
    """A sys.meta_path finder that only watches the libraries in WATCHED."""

    def __init__(self, rec: Any) -> None:
        self.rec = rec
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in WATCHED or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        except Exception:  # noqa: BLE001 - let the normal machinery try (and report) it
            return None
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _TimedLoader(spec.loader, fullname, self)
        return spec

    def loaded(self, name: str, module: Any, start_ns: int, dur_ns: int) -> None:
        try:
            if WATCHED[name][2]:
                self.rec.event("import", name, ts_ns=start_ns, dur_ns=dur_ns,
                               version=str(getattr(module, "__version__", "")))
        except Exception:  # noqa: BLE001
            pass
        activate(self.rec, name, module)

    def invalidate_caches(self) -> None:
        pass


def install_import_hooks(rec: Any) -> None:
    """Watch imports of torch/onnxruntime/nvtx; hook those already imported now."""
    sys.meta_path.insert(0, _Finder(rec))
    for name in WATCHED:
        if name in sys.modules:
            activate(rec, name, sys.modules[name])
