"""diag's bootstrap: loaded by every Python target started under `diag profile`.

The launcher puts this directory first on PYTHONPATH, so Python's `site`
imports this file as `sitecustomize` at start-up (subprocesses inherit it).
It records nothing unless DIAG_RUN_DIR is set. Then it:
  1. allows any process of the user to ptrace us (prctl PR_SET_PTRACER_ANY)
     where Yama ptrace_scope is 1, so diag's py-spy can attach;
  2. starts the recorder and its lazy import hooks (diag.collect.recorder);
  3. runs the user's own sitecustomize, the next one on sys.path.
Our failures become a `note` event (or nothing) and the target runs on; an
error in the user's sitecustomize is left to `site`, which prints it as usual.
Keep this file tiny and fast: it runs before every target.
"""

import os
import sys

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


def _start():
    problem = _allow_ptrace()
    try:
        import diag.collect.recorder as recorder
    except ImportError:
        parent = os.environ.get("DIAG_PKG_PARENT")
        if not parent:
            return
        sys.path.append(parent)  # at the end: never shadow the target's own modules
        try:
            import diag.collect.recorder as recorder
        except ImportError:
            return
    rec = recorder.start_from_env()
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
            from diag.collect.recorder import active_recorder

            _rec = active_recorder()
            if _rec is not None:
                _rec.note("bootstrap", f"diag bootstrap failed: {_exc!r}")
        except Exception:  # noqa: BLE001
            pass
_chain_user_sitecustomize()
