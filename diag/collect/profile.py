"""`diag profile`: record a run of any command into a run directory.

Order matters: the run directory and a first run.json exist before the
target starts (so a kill at any moment leaves a readable, partial run);
signals are blocked before any thread exists (see launcher.py); samplers
start once the target's pid is known; the end of the run is written last.
Nothing that fails here may change the target's exit code.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from diag.collect import launcher
from diag.collect.kernel_windows import recorded_choice
from diag.collect.manifest import allowed_env, host_info, versions
from diag.collect.options import default, off_reason
from diag.collect.redact import redact_argv
from diag.collect.sampler import Sampler
from diag.errors import DiagError
from diag.store.jsonl import RAW_DIR, read_jsonl, read_raw
from diag.store.manifest import MANIFEST, SCHEMA, write_manifest

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")


@dataclass
class ProfileOptions:
    """What `diag profile` was asked for: one field per option with a CLI flag (options.py)."""

    out: str | None = None
    duration_s: float | None = None
    grace_s: float = default("grace_s")
    host_interval_s: float | None = default("host_interval_s")  # None: 0.1 s, adaptive (host_sampler.py)
    gpu_interval_s: float = default("gpu_interval_s")
    stack_rate_hz: int | None = default("stack_rate_hz")  # None: default_stack_rate()
    stacks: bool = default("stacks")
    idle_priority: bool = default("idle_priority")
    gpu: bool = default("gpu")
    gpm: bool = default("gpm")
    gpm_interval_s: float = default("gpm_interval_s")
    hooks: bool = default("hooks")
    kernel_windows: int = default("kernel_windows")
    kernel_backend: str = default("kernel_backend")
    kernel_window_steps: int = default("kernel_window_steps")
    redact: bool = default("redact")
    load: str | None = default("load")  # `diag load` words; the CLI turns them into a Companion
    load_wait_s: float = default("load_wait_s")
    extra: dict[str, Any] = field(default_factory=dict)  # more target options (DIAG_OPTIONS)


class Companion(Protocol):
    """Work diag does beside the target while it runs (`diag profile --load`: drive load at it)."""

    def public(self) -> dict[str, Any]: ...  # its settings for run.json["options"], secrets hidden
    def start(self, run_dir: str, pid: int) -> None: ...  # the target runs; return at once
    def done(self) -> bool: ...  # True: its work is over, stop the target (SIGINT, then the escalation)
    def finish(self, manifest: dict[str, Any]) -> None: ...  # the target ended: end, add rows and notes


@dataclass
class Recording:
    run_dir: str
    exit_code: int
    manifest: dict[str, Any]
    reraise: int | None = None  # the signal diag should end by (launcher.Outcome.reraise)


def default_stack_rate() -> int:
    """py-spy costs a fixed share of one core per Hz (~7% at 100 Hz on a torch
    target): a small host has no core to spare, so it samples at half rate."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 100 if cores >= 8 else 50


# python's own options that take a value (`python -W ignore app.py`)
_PY_VALUE_OPTS = ("-W", "-X", "--check-hash-based-pycs")
_EXTS = (".py", ".pyz", ".pyw", ".sh", ".exe")


def run_name(cmd: list[str]) -> str:
    """A run directory's name part: the script (`serve` for `python serve.py --port 8000`),
    the module (`-m pkg.mod`), else the program; never an argument, which may be a secret."""
    prog = os.path.basename(cmd[0])
    if prog.startswith("python"):
        args = iter(cmd[1:])
        for arg in args:
            if arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")):
                prog = arg[2:] or next(args, prog)
                break
            if arg == "-c" or (arg.startswith("-c") and not arg.startswith("--")) or arg == "-":
                break  # code on the command line: name the run after the interpreter
            if arg in _PY_VALUE_OPTS:
                next(args, None)
            elif not arg.startswith("-"):
                prog = os.path.basename(arg)
                break
    stem, ext = os.path.splitext(prog)
    prog = stem if ext in _EXTS else prog
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in prog)[:40].strip("-") or "run"


def default_out(cmd: list[str]) -> str:
    """diag-runs/<time>-<name>: prepare_run_dir(unique=True) adds -2, -3... if taken."""
    return os.path.join("diag-runs", f"{time.strftime('%Y%m%d-%H%M%S')}-{run_name(cmd)}")


def prepare_run_dir(out: str, unique: bool = False) -> str:
    """Create the run directory (mode 0700) and return its absolute path.

    `os.mkdir` is the claim: it never reuses a path that exists, a planted symlink
    included. `unique`: a taken name gets a suffix (-2, -3, ...), so two runs
    started in the same second get two directories. Otherwise (an explicit
    --out) an existing empty directory is accepted, and the first run.json,
    created exclusively (write_manifest(new=True)), claims it.
    """
    path = os.path.abspath(out)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise DiagError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None
    for n in range(1, 1000):
        candidate = path if n == 1 else f"{path}-{n}"
        try:
            os.mkdir(candidate, 0o700)
            return candidate
        except FileExistsError:
            if unique:
                continue
        except OSError as exc:
            raise DiagError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None
        if os.path.islink(path):
            raise DiagError(f"--out {out}: is a symbolic link (diag does not follow links for a run directory)")
        if not os.path.isdir(path):
            raise DiagError(f"--out {out}: exists and is not a directory")
        if os.listdir(path):
            raise DiagError(f"--out {out}: directory is not empty (diag never overwrites a run)")
        return path
    raise DiagError(f"--out {out}: no free name (tried {out}-2 to -999)")


def claim_run_dir(run_dir: str, out: str, manifest: dict[str, Any]) -> None:
    """The first run.json, created exclusively: a second diag on the same directory is refused."""
    try:
        write_manifest(run_dir, manifest, new=True)
    except FileExistsError:
        raise DiagError(f"--out {out}: directory is not empty (another run is using it)") from None
    except OSError as exc:
        raise DiagError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None


def _discard(run_dir: str, created: bool) -> None:
    """Remove what diag made for a target that never started."""
    for path in (os.path.join(run_dir, MANIFEST), os.path.join(run_dir, RAW_DIR)):
        try:
            os.rmdir(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        except OSError:
            pass
    if created:
        try:
            os.rmdir(run_dir)
        except OSError:
            pass


def _check_runnable(cmd: list[str]) -> None:
    """One-line errors for a target that cannot start, before anything is written."""
    exe = launcher.find_command(cmd)
    if exe is None:
        raise DiagError(f"{cmd[0]}: command not found", exit_code=127)
    if os.path.isdir(exe):
        raise DiagError(f"{cmd[0]}: is a directory", exit_code=126)
    if not os.access(exe, os.X_OK):
        raise DiagError(f"{cmd[0]}: permission denied (not executable)", exit_code=126)


def target_env(run_dir: str, opts: ProfileOptions) -> dict[str, str]:
    env = dict(os.environ)
    env["DIAG_RUN_DIR"] = run_dir
    env["DIAG_OPTIONS"] = json.dumps({
        "hooks": opts.hooks, "kernel_windows": opts.kernel_windows if opts.gpu else 0,
        "kernel_window_steps": opts.kernel_window_steps, "kernel_backend": opts.kernel_backend,
        "redact": opts.redact, **opts.extra,
    })
    if opts.hooks:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (BOOTSTRAP_DIR, env.get("PYTHONPATH", "")) if p)
    return env


def _samplers(opts: ProfileOptions) -> tuple[list[Sampler], dict[str, dict[str, Any]]]:
    """The samplers to run, and the status of those that are off."""
    from diag.collect.gpu_sampler import GpuSampler
    from diag.collect.host_sampler import DEFAULT_INTERVAL_S, HostSampler
    from diag.collect.socket_sampler import SocketSampler
    from diag.collect.stack_sampler import StackSampler

    host_s = opts.host_interval_s or DEFAULT_INTERVAL_S
    samplers: list[Sampler] = [HostSampler(host_s, adaptive=opts.host_interval_s is None),
                               SocketSampler(max(host_s, 0.5))]
    off: dict[str, dict[str, Any]] = {}
    if opts.gpu:
        samplers.append(GpuSampler(opts.gpu_interval_s, gpm=opts.gpm, gpm_interval_s=opts.gpm_interval_s))
    else:
        off["gpu"] = {"status": "off", "reason": off_reason("gpu")}
    if opts.stacks:
        stacks = StackSampler(opts.stack_rate_hz or default_stack_rate(), adaptive=opts.stack_rate_hz is None)
        stacks.redact = opts.redact
        samplers.append(stacks)
    else:
        off["stacks"] = {"status": "off", "reason": off_reason("stacks")}
    for sampler in samplers:
        sampler.idle = opts.idle_priority
    return samplers, off


def _gpu_inventory(enabled: bool) -> dict[str, Any]:
    if not enabled:
        return {"count": 0, "reason": off_reason("gpu")}
    try:
        from diag.collect.gpu_sampler import gpu_inventory

        return gpu_inventory()
    except Exception as exc:  # noqa: BLE001 - an inventory failure is a note, not a crash
        return {"count": 0, "reason": f"{exc.__class__.__name__}: {exc}"}


def record(cmd: list[str], opts: ProfileOptions, companion: Companion | None = None) -> Recording:
    """Run `cmd` under diag and return where the run went and the target's exit code.

    `companion` (optional) starts once the target runs; when it is done the target is stopped.
    """
    if not cmd:
        raise DiagError("no command given: diag profile [options] -- CMD [ARGS...]")
    _check_runnable(cmd)
    out = opts.out or default_out(cmd)
    existed = os.path.lexists(out)
    run_dir = prepare_run_dir(out, unique=opts.out is None)
    manifest: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}",
        "command": redact_argv(cmd) if opts.redact else list(cmd), "cwd": os.getcwd(),
        "start_ns": time.time_ns(), "end_ns": None, "duration_s": None,
        "exit_code": None, "signal": None, "partial": True,
        "host": host_info(), "gpu": _gpu_inventory(opts.gpu), "versions": versions(),
        "env": allowed_env(dict(os.environ), redact=opts.redact),
        "collectors": {"hooks": {"status": "ok"} if opts.hooks else {"status": "off", "reason": off_reason("hooks")}},
        "options": {**{k: v for k, v in asdict(opts).items() if k not in ("out", "extra", "load")},
                    "stack_rate_hz": opts.stack_rate_hz or default_stack_rate(), **opts.extra},
    }
    if companion is not None:  # the load's words may hold a secret header: its redacted settings only
        manifest["options"]["load"] = companion.public()
    claim_run_dir(run_dir, out, manifest)

    launcher.block_signals()
    try:
        proc = launcher.start(cmd, target_env(run_dir, opts))
    except OSError as exc:
        launcher.unblock_in_child()
        _discard(run_dir, created=opts.out is None or not existed)
        raise DiagError(f"{cmd[0]}: cannot run ({exc.strerror or exc})", exit_code=126) from None
    manifest["pid"] = proc.pid
    samplers: list[Sampler] = []
    try:
        samplers, off = _samplers(opts)
        for s in samplers:
            s.start(run_dir, proc.pid)
        if companion is not None:
            companion.start(run_dir, proc.pid)
        # Samplers record their status as soon as they know it: a killed diag still says why.
        manifest["collectors"].update(off)
        manifest["collectors"].update({s.name: s.status() for s in samplers})
        write_manifest(run_dir, manifest)
    except Exception as exc:  # noqa: BLE001 - diag's trouble never stops the target
        _warn(f"recording degraded ({exc.__class__.__name__}: {exc})")

    outcome = launcher.wait(proc, opts.duration_s, opts.grace_s,
                            stop_when=companion.done if companion is not None else None,
                            started=_started(run_dir, proc.pid) if opts.hooks else None)
    launcher.unblock_in_child()
    try:
        for s in samplers:
            s.stop()
        if companion is not None:
            companion.finish(manifest)
        manifest.update(end_ns=time.time_ns(), exit_code=outcome.exit_code, signal=outcome.signal,
                        stopped_by_duration=outcome.stopped_by_duration)
        if outcome.outlived:  # launcher.wait_for_tree: the target's processes diag left running
            manifest["outlived_pids"] = outcome.outlived
            _warn(f"{len(outcome.outlived)} of the target's processes still run after it exited "
                  f"(pids {', '.join(map(str, outcome.outlived[:8]))})")
        manifest["duration_s"] = (manifest["end_ns"] - manifest["start_ns"]) / 1e9
        manifest["collectors"].update({s.name: s.status() for s in samplers})
        _merge_target_meta(run_dir, manifest)
        manifest["collectors"]["kernels"] = _kernel_status(run_dir, opts)
        write_manifest(run_dir, manifest)
        _seal(run_dir, manifest)
    except Exception as exc:  # noqa: BLE001 - the run stays readable (partial) from raw/
        _warn(f"could not finish the run directory ({exc.__class__.__name__}: {exc}); it reads as partial")
    return Recording(run_dir, outcome.exit_code, manifest, outcome.reraise)


def _started(run_dir: str, pid: int) -> Callable[[], bool]:
    """launcher.wait's `started`: True once the root process runs its own code.

    A Python root says so through diag's bootstrap (a raw/meta row `startup_done`,
    written after the user's sitecustomize); a program the bootstrap cannot load in
    (not Python, or `python -I/-S/-E`) never will, so it counts as started at once.
    """
    path = os.path.join(run_dir, RAW_DIR, f"meta.{pid}.jsonl")
    seen = False

    def python_root() -> bool:
        # Read at every call: just after the fork the process is still diag's own Python,
        # until its exec; the image and argv are the target's from then on.
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            return False
        return exe.startswith(("python", "pypy")) and not _skips_bootstrap(argv[1:])

    def started() -> bool:
        nonlocal seen
        if not seen:
            try:
                seen = not python_root() or any(row.get("startup_done") for row in read_jsonl(path))
            except (OSError, DiagError):
                pass  # no row yet
        return seen

    return started


def _skips_bootstrap(args: list[str]) -> bool:
    """Python's options before the program hold -I, -S or -E (`-IS` too): no sitecustomize from PYTHONPATH."""
    values = iter(args)
    for arg in values:
        if arg == "-" or not arg.startswith("-") or arg.startswith("--"):
            return False
        for i, c in enumerate(arg[1:], 1):
            if c in "ISE":
                return True
            if c in "cm":
                return False  # the program: -c CODE, -m MODULE
            if c in "WX":  # the rest is its value, else the next argument is
                if i == len(arg) - 1:
                    next(values, None)
                break
    return False


def _warn(message: str) -> None:
    print(f"diag: {message}", file=sys.stderr)


def _merge_target_meta(run_dir: str, manifest: dict[str, Any]) -> None:
    """Take the target's own versions and the hooks' status from raw/meta rows."""
    metas = read_raw(run_dir, "meta")
    hooks = manifest["collectors"]["hooks"]
    if hooks.get("status") == "off":
        return
    if not metas:
        hooks.update(status="unavailable",
                     reason="no Python process loaded diag's bootstrap (not a Python target?)")
        return
    hooks["processes"] = len({m.get("pid") for m in metas})
    target: dict[str, Any] = {}
    for m in metas:  # one process's rows: interpreter first, then each library as it is imported
        target.update({k: v for k, v in m.items() if k in ("python", "torch", "onnxruntime", "cuda_runtime") and v})
    manifest["versions"]["target"] = target


def _kernel_status(run_dir: str, opts: ProfileOptions) -> dict[str, Any]:
    """Kernel windows run inside the target: read what they recorded."""
    for name, on in (("gpu", opts.gpu), ("hooks", opts.hooks), ("kernel_windows", opts.kernel_windows > 0)):
        if not on:
            return {"status": "off", "reason": off_reason(name)}
    windows = read_raw(run_dir, "windows")
    events = read_raw(run_dir, "events")
    if windows:
        return {"status": "ok", "windows": len(windows), **recorded_choice(events)}
    notes = [e for e in events if e.get("kind") == "note" and e.get("name") == "kernel_windows"]
    if notes:
        try:
            reason = json.loads(notes[-1].get("detail") or "{}").get("reason") or "no window opened"
        except (ValueError, AttributeError):
            reason = "no window opened"
        failed = "fail" in str(reason).lower() or "error" in str(reason).lower()
        return {"status": "failed" if failed else "off", "reason": str(reason), **recorded_choice(events)}
    return {"status": "off", "reason": "no window opened (no CUDA steps, or the run ended before warm-up)"}


def _seal(run_dir: str, manifest: dict[str, Any]) -> None:
    """Raw rows to Parquet; the run stays readable (partial) if this fails."""
    try:
        from diag.store.loss import mark_loss
        from diag.store.run import seal

        loss = seal(run_dir)
    except Exception as exc:  # noqa: BLE001 - the raw rows are still there
        _warn(f"could not write Parquet tables ({exc}); the run stays readable from raw/")
        return
    manifest["partial"] = False
    mark_loss(manifest, loss)  # rows lost while recording: partial again, hooks degraded (store/loss.py)
    write_manifest(run_dir, manifest)
