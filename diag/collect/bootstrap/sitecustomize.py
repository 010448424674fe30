"""diag's bootstrap: loaded by every Python target started under `diag profile`.

The launcher puts this directory first on PYTHONPATH, so Python's `site`
imports this file as `sitecustomize` at start-up (subprocesses inherit it).
It records nothing unless DIAG_RUN_DIR is set. Then it:
  1. allows any process of the user to ptrace us (prctl PR_SET_PTRACER_ANY)
     where Yama ptrace_scope is 1, so diag's py-spy can attach;
  2. starts the recorder and its lazy import hooks, leaving no trace in the
     target's namespace (`_load_recorder`);
  3. runs the user's own sitecustomize, the next one on sys.path.
Our failures become a `note` event (or nothing) and the target runs on; an
error in the user's sitecustomize is left to `site`, which prints it as usual.
Keep this file tiny and fast: it runs before every target.
"""

import os
import sys

# diag's package runs in the target under this name, loaded from diag's own files (this
# file is <diag>/collect/bootstrap/sitecustomize.py): nothing named `diag` enters
# sys.modules, so a target's own `diag.py` is the `diag` it imports. diag/api.py finds
# the recorder under this name.
PRIVATE = "_diag_rec"
# Standard modules the recorder keeps in sys.modules: their state must be one per
# process (threading's registry of threads). Built-in modules stay too: no file of the
# target can shadow them. Every other module loaded with the recorder is taken out again.
SHARED = ("threading", "_weakrefset")

_PR_SET_PTRACER = 0x59616D61
_PR_SET_PTRACER_ANY = -1  # (unsigned long)-1


def _allow_ptrace():
    """Only when Yama would refuse a non-parent tracer (scope 1); ctypes costs ms."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", "rb") as f:
            if f.read().strip() != b"1":
                return None
    except OSError:
        return None  # no Yama: any process of the user may attach already
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PTRACER, ctypes.c_ulong(_PR_SET_PTRACER_ANY), 0, 0, 0) != 0:
            return f"prctl(PR_SET_PTRACER) failed: errno {ctypes.get_errno()}"
    except Exception as exc:  # noqa: BLE001 - no Yama, no libc: nothing to do
        return f"prctl(PR_SET_PTRACER) failed: {exc!r}"
    return None


def _stdlib_path():
    """The entries of sys.path that hold the standard library (no site-packages, no PYTHONPATH)."""
    lib = os.path.dirname(getattr(os, "__file__", None) or "")
    if not lib:
        return list(sys.path)
    parent = os.path.dirname(lib)
    keep = []
    for entry in sys.path:
        inside = entry == lib or entry.startswith(lib + os.sep)
        zipped = entry.endswith(".zip") and os.path.dirname(entry) == parent
        if (inside and "site-packages" not in entry and "dist-packages" not in entry) or zipped:
            keep.append(entry)
    return keep


def _load_recorder():
    """Start diag's recorder as `_diag_rec.collect.recorder`; return its module.

    The standard modules it needs are found in the standard library alone
    (sys.path narrowed meanwhile: a `json.py` on PYTHONPATH is not ours either),
    then taken out of sys.modules again but for SHARED, so the target's own
    imports find what they would find without diag.
    """
    pkg_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    before = set(sys.modules)
    saved_path = sys.path[:]
    sys.path[:] = _stdlib_path()
    try:
        pkg = type(sys)(PRIVATE, "diag's package, private to the recorder")
        pkg.__path__ = [pkg_dir]
        pkg.__package__ = PRIVATE
        sys.modules[PRIVATE] = pkg
        __import__(PRIVATE + ".collect.recorder")
        recorder = sys.modules[PRIVATE + ".collect.recorder"]
        recorder.start_from_env()
        return recorder
    finally:
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            if name.partition(".")[0] != PRIVATE and name not in SHARED and name not in sys.builtin_module_names:
                del sys.modules[name]


def _start():
    problem = _allow_ptrace()
    rec = _load_recorder().active_recorder()
    if rec is not None and problem:
        rec.note("ptrace", problem)


def _chain_user_sitecustomize():
    """Run the next `sitecustomize` on sys.path after this directory, as site would."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = []
    seen_here = False
    for entry in sys.path:
        if os.path.abspath(entry or os.curdir) == here:
            seen_here = True
            rest = []
            continue
        rest.append(entry)
    if not seen_here:
        return
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    import importlib.util

    module = importlib.util.module_from_spec(spec)
    ours = sys.modules.get("sitecustomize")
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules["sitecustomize"] = ours
        raise


if os.environ.get("DIAG_RUN_DIR"):
    try:
        _start()
    except Exception as _exc:  # noqa: BLE001 - never hurt the target
        try:
            _rec = sys.modules[PRIVATE + ".collect.recorder"].active_recorder()
            if _rec is not None:
                _rec.note("bootstrap", f"diag bootstrap failed: {_exc!r}")
        except Exception:  # noqa: BLE001
            pass
try:
    _chain_user_sitecustomize()
finally:
    # Start-up is over: `diag profile --duration` holds its SIGINT until this row (launcher.wait).
    _mod = sys.modules.get(PRIVATE + ".collect.recorder")
    _rec = _mod.active_recorder() if _mod is not None else None
    if _rec is not None:
        _rec.meta(startup_done=True)
