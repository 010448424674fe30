"""Every `diag profile` option, defined once: default, CLI flag, help, and why it is off.

The CLI builds its flags from this table, `ProfileOptions` takes its defaults
from it, and the code in the target (recorder, hooks, kernel windows) reads
its defaults from it. Every numeric option has a range (`min`, `max`,
inclusive): `parse` and `check` refuse anything outside it, NaN and
infinities included, so a new option is validated as soon as it is added.
An option is either for diag itself (`side="diag"`: sampling intervals,
which samplers run) or passed to the target in `DIAG_OPTIONS`
(`side="target"`).

Recording side, and imported by the target at start-up: standard library only,
nothing costly at import.
"""

from __future__ import annotations

from typing import Any, NoReturn


class Option:
    """One option. `flag` None: not on the command line (set through DIAG_OPTIONS only).

    `off` is the status reason a collector reports when this option turns it off
    (a switch `--no-x`, or a count set to 0). `type` is taken from a numeric
    default when not given; a numeric option needs `min` and `max`.
    """

    __slots__ = ("name", "default", "flag", "help", "type", "metavar", "off", "side", "min", "max")

    def __init__(self, name: str, default: Any, help: str, *, flag: str | None = None,  # noqa: A002
                 type: type | None = None, metavar: str | None = None, off: str | None = None,  # noqa: A002
                 side: str = "diag", min: float | None = None, max: float | None = None) -> None:  # noqa: A002
        self.name = name
        self.default = default
        self.help = help
        self.flag = flag
        if type is None and default.__class__ in (int, float):
            type = default.__class__  # noqa: A001
        self.type = type
        self.metavar = metavar
        self.off = off
        self.side = side
        self.min = min
        self.max = max

    @property
    def switch(self) -> bool:
        """True for an on/off option whose flag turns it off (`--no-gpu`); see `flag_on`."""
        return isinstance(self.default, bool) and self.flag is not None and self.flag.startswith("--no-")

    @property
    def flag_on(self) -> bool:
        """True for an option off by default whose flag turns it on (`--idle-priority`)."""
        return self.default is False and self.flag is not None and not self.flag.startswith("--no-")


_T = "target"


def kernel_backend(value: str) -> str:
    """`--kernel-backend` value check (`parse` reports the ValueError as an invalid value)."""
    if value not in ("auto", "cupti", "torch"):
        raise ValueError(value)
    return value


_DAY = 86_400.0
_BIG = 10**9  # a count no run reaches

OPTIONS: tuple[Option, ...] = (
    # -- diag's own samplers -------------------------------------------------------------------
    Option("duration_s", None, "stop the target gracefully after S seconds", flag="--duration", type=float,
           metavar="S", min=0.01, max=30 * _DAY),
    Option("grace_s", 5.0, "seconds between SIGINT, SIGTERM, SIGKILL", flag="--grace", type=float, metavar="S",
           min=0.0, max=3600.0),
    Option("host_interval_s", None, "psutil sampling interval (default: 0.1, 0.5 while a host of at most 4 cores "
           "has no idle core; an interval given here is kept)", flag="--host-interval", type=float, metavar="S",
           min=0.01, max=3600.0),
    Option("gpu_interval_s", 0.1, "NVML sampling interval", flag="--gpu-interval", type=float, metavar="S",
           min=0.01, max=3600.0),
    Option("stack_rate_hz", None, "py-spy sampling rate (default: 100, or 50 on hosts with fewer than 8 cores, "
           "10 while a host of at most 4 cores has no idle core; a rate given here is kept)",
           flag="--stack-rate", type=int, metavar="HZ", min=1, max=1000),
    Option("load", None, "drive HTTP load at the server once URL answers, then stop it (the words of "
           "`diag load`: 'URL --rate 50 --duration 10 --slo p99<200ms'); client and server side in one run",
           flag="--load", type=str, metavar="'URL --rate R ...'"),
    Option("load_wait_s", 60.0, "with --load: seconds to wait for URL to answer before giving up (the server "
           "is then stopped, the run kept)", flag="--load-wait", type=float, metavar="S", min=0.1, max=_DAY),
    Option("stacks", True, "do not sample Python stacks (py-spy)", flag="--no-stacks", off="--no-stacks"),
    Option("idle_priority", False, "run diag's samplers and py-spy at idle CPU priority (SCHED_IDLE): they "
           "never preempt the target, but on a host with no idle core they sample less often",
           flag="--idle-priority"),
    Option("gpu", True, "do not sample the GPU or open kernel windows", flag="--no-gpu", off="--no-gpu"),
    Option("gpm", True, "do not read NVML GPM metrics (SM, tensor and DRAM activity)", flag="--no-gpm",
           off="--no-gpm"),
    Option("gpm_interval_s", 1.0, "NVML GPM interval: each GPM row averages the counters over this span (reading "
           "them slows the GPU's own kernels, so less often than the other NVML figures)", flag="--gpm-interval",
           type=float, metavar="S", min=0.02, max=3600.0),
    # -- passed to the target ----------------------------------------------------------------------
    Option("hooks", True, "do not inject the in-process hooks", flag="--no-hooks", off="--no-hooks", side=_T),
    Option("redact", True, "keep secrets in recorded command lines and environment (no redaction; "
           "docs/security.md)", flag="--no-redact", side=_T),
    Option("kernel_windows", 2, "kernel windows: short CUPTI captures of a few steps (0: none)", flag="--kernel-windows", type=int,
           metavar="N", off="--kernel-windows 0", side=_T, min=0, max=1000),
    Option("kernel_backend", "auto", "how kernel windows record: cupti (cupti-python, no start-up cost), torch "
           "(torch.profiler), auto (cupti when installed)", flag="--kernel-backend", type=kernel_backend,
           metavar="auto|cupti|torch", side=_T),
    Option("kernel_window_steps", 5, "steps per kernel window", flag="--kernel-window-steps", type=int,
           metavar="N", side=_T, min=1, max=10_000),
    Option("kernel_window_after_steps", 20, "no window before this many steps", side=_T, min=0, max=_BIG),
    Option("kernel_window_after_s", 3.0, "no window before this many seconds after start-up", side=_T,
           min=0.0, max=30 * _DAY),
    Option("kernel_window_spacing_steps", 20, "steps between two windows, at least", side=_T, min=0, max=_BIG),
    Option("kernel_window_spacing_s", 5.0, "seconds between two windows, at least", side=_T,
           min=0.0, max=30 * _DAY),
    Option("kernel_window_max_s", 10.0, "a window closes after this many seconds", side=_T, min=0.01, max=3600.0),
    Option("torch", True, "torch hooks (steps, copies, syncs, torch.load, torch.cuda.nvtx)", side=_T),
    Option("onnxruntime", True, "onnxruntime hooks (steps, session creation)", side=_T),
    Option("nvtx", True, "nvtx package hooks (ranges)", side=_T),
    Option("serving", True, "ASGI/WSGI server hooks (requests found in uvicorn, gunicorn, Starlette, Flask)", side=_T),
    Option("generate", True, "Hugging Face generate() calls as requests (time to first token, per token)", side=_T),
    Option("copies", True, "Tensor.to/.cuda/.cpu/.copy_ copies (torch)", side=_T),
    Option("syncs", True, "synchronizing calls (torch)", side=_T),
    Option("gc", True, "GC pauses through gc.callbacks", side=_T),
    Option("cuda_events", True, "GPU time per step from torch.cuda.Event pairs", side=_T),
    Option("cuda_event_all", 64, "time every one of the first N CUDA steps ...", side=_T, min=0, max=_BIG),
    Option("cuda_event_every", 4, "... then 1 step in this many, or fewer: at most 50 a second (gpu_ns = -1 on the others)", side=_T,
           min=1, max=_BIG),
    Option("table_rows", 50_000, "rows kept in full per table before sampling starts", side=_T, min=1, max=_BIG),
    Option("detail_rows", 2_000, "syncs, copies and collectives rows kept in full before sampling starts (they "
           "come once a step or more: their JSON work would tax a fast loop)", side=_T, min=1, max=_BIG),
    Option("rows_per_s", 1_000, "past detail_rows, steps, syncs, copies and collectives are kept at most ~this "
           "many a second (1 in k, weight k: their JSON work would tax a fast loop)", side=_T, min=1, max=_BIG),
    Option("flush_s", 1.0, "background flush interval (a killed target loses at most this)", side=_T,
           min=0.01, max=3600.0),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


def default(name: str) -> Any:
    """The default of option `name`."""
    return BY_NAME[name].default


def defaults(side: str | None = None) -> dict[str, Any]:
    """{name: default} of every option, or of one side ("diag" or "target")."""
    return {o.name: o.default for o in OPTIONS if side is None or o.side == side}


def off_reason(name: str) -> str:
    """The status reason of a collector turned off by option `name`, e.g. "turned off by --no-gpu"."""
    return f"turned off by {BY_NAME[name].off or name}"


def check(name: str, value: Any, text: str | None = None) -> Any:
    """`value` if it suits option `name` (its type, a finite number within its range), else DiagError.

    `text`: the value as the user wrote it, for the message.
    """
    o = BY_NAME[name]
    if o.type not in (int, float) or (value is None and o.default is None):
        return value
    shown = f"{o.flag or o.name} {repr(value) if text is None else text}"
    if value.__class__ is bool or not isinstance(value, int if o.type is int else (int, float)):
        _refuse(f"{shown}: not {'an integer' if o.type is int else 'a number'}")
    if not o.min <= value <= o.max:  # NaN fails this too
        what = "a finite number" if value != value or value in (float("inf"), float("-inf")) else "a number"
        _refuse(f"{shown}: must be {what} from {_num(o.min)} to {_num(o.max)}")
    return value


def parse(name: str, text: str) -> Any:
    """Option `name`'s value from command-line text, checked (DiagError, one line, when unfit)."""
    o = BY_NAME[name]
    try:
        value = o.type(text) if o.type is not None else text
    except (TypeError, ValueError):
        what = {int: "not an integer", float: "not a number"}.get(o.type, "invalid value")
        _refuse(f"{o.flag or o.name} {text}: {what}")
    return check(name, value, text)


_TRUE, _FALSE = ("true", "1", "on", "yes"), ("false", "0", "off", "no")


def parse_setting(text: str) -> tuple[str, Any]:
    """`--set NAME=VALUE`: a target option that has no flag of its own (e.g. `copies=false`), checked."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    o = BY_NAME.get(name)
    if not sep or o is None or o.side != _T:
        known = ", ".join(x.name for x in OPTIONS if x.side == _T and x.flag is None)
        _refuse(f"--set {text}: expected NAME=VALUE with NAME one of {known}")
    if isinstance(o.default, bool):
        low = value.strip().lower()
        if low not in _TRUE + _FALSE:
            _refuse(f"--set {text}: {name} is true or false")
        return name, low in _TRUE
    from ..errors import DiagError

    try:
        return name, parse(name, value.strip())
    except DiagError as exc:
        _refuse(f"--set {exc}")


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def _refuse(message: str) -> NoReturn:
    from ..errors import DiagError  # lazily: the target imports this module at start-up

    raise DiagError(message)
