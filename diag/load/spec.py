"""What to send: the load's settings (LoadSpec), parsed once from `diag load` arguments.

`diag profile --load 'URL --rate R ...'` hands the same words to `parse_load_args`,
so both commands accept exactly the same load options.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
from dataclasses import dataclass, field
from typing import Any, NoReturn
from urllib.parse import urlsplit

from diag.collect.redact import MASK, is_secret_name, redact_argv, redact_value
from diag.errors import DiagError
from diag.load.schedule import ARRIVALS
from diag.load.slo import Slo, parse_slo

MAX_BODY_BYTES = 64 << 20


@dataclass(frozen=True)
class LoadSpec:
    """One load: open loop at `rate` per second, or closed loop with `concurrency` requests in flight."""

    url: str
    rate: float | None = None
    concurrency: int | None = None
    duration: float = 10.0
    warmup: float = 1.0
    method: str = "GET"
    bodies: tuple[bytes, ...] = ()  # cycled through; empty: no body
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 10.0
    arrivals: str = "poisson"
    slos: tuple[Slo, ...] = ()
    sweep: bool = False
    sweep_factor: float = 1.5
    sweep_max_steps: int = 12
    sweep_refine: int = 2
    max_connections: int = 1000
    argv: tuple[str, ...] = field(default=(), repr=False)  # as typed, for run.json (redacted there)

    @property
    def mode(self) -> str:
        return "closed" if self.concurrency else "open"

    def public(self) -> dict[str, Any]:
        """The settings as stored and printed: header values with a secret name and URL credentials hidden."""
        return {"url": redact_value(self.url), "mode": self.mode, "rate": self.rate, "concurrency": self.concurrency,
                "arrivals": self.arrivals if self.mode == "open" else None,
                "duration_s": self.duration, "warmup_s": self.warmup, "method": self.method,
                "payloads": len(self.bodies), "timeout_s": self.timeout,
                "headers": {k: MASK if is_secret_name(k) else redact_value(v) for k, v in self.headers},
                "slos": [s.text for s in self.slos], "sweep": self.sweep,
                "argv": redact_argv(self.argv)}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise DiagError(f"load: {message}")


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `diag load` (also read from `diag profile --load '...'`)."""
    p.add_argument("url", metavar="URL", help="the one URL to load (redirects are counted, never followed)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--rate", type=float, metavar="R", help="open loop: R requests per second (default 10)")
    how.add_argument("--concurrency", type=int, metavar="C", help="closed loop: C requests in flight")
    p.add_argument("--arrivals", choices=ARRIVALS, default="poisson", help="open-loop arrivals (default poisson)")
    p.add_argument("--duration", type=float, default=10.0, metavar="S", help="measured seconds (per sweep step)")
    p.add_argument("--warmup", type=float, default=None, metavar="S",
                   help="seconds of load before measuring, left out of the figures (default 1; 0.5 per sweep step)")
    p.add_argument("--method", default=None, help="HTTP method (default GET, POST with a body)")
    p.add_argument("--body", metavar="FILE|TEMPLATE", help="request body: a file, or text where {i} is the request number")
    p.add_argument("--payloads", metavar="FILE.jsonl", help="JSON bodies, one a line, sent in turn")
    p.add_argument("--header", "-H", action="append", default=[], metavar="'K: V'", help="request header (repeatable)")
    p.add_argument("--timeout", type=float, default=10.0, metavar="S", help="per-request timeout (default 10 s)")
    p.add_argument("--slo", action="append", default=[], metavar="'p99<200ms'",
                   help="objective to check: pNN|max|mean<TIME or errors<PCT (repeatable)")
    p.add_argument("--sweep", action="store_true", help="step the rate (or concurrency) up to the highest meeting the SLOs")
    p.add_argument("--sweep-factor", type=float, default=1.5, metavar="F", help="geometric step of the sweep")
    p.add_argument("--sweep-steps", type=int, default=12, metavar="N", help="most climbing steps of the sweep")
    p.add_argument("--sweep-refine", type=int, default=2, metavar="N", help="bisecting steps after the climb")
    p.add_argument("--max-connections", type=int, default=1000, metavar="N", help="open connections at most")


def spec_from_args(a: argparse.Namespace, argv: list[str] | tuple[str, ...] = ()) -> LoadSpec:
    """A checked LoadSpec from parsed options; DiagError (one line) for anything wrong."""
    parts = urlsplit(a.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DiagError(f"load: {redact_value(a.url)}: not an http(s) URL")
    for name, v in (("--rate", a.rate), ("--concurrency", a.concurrency), ("--duration", a.duration),
                    ("--timeout", a.timeout), ("--warmup", a.warmup), ("--max-connections", a.max_connections)):
        if v is not None and not (math.isfinite(v) and (v > 0 or (name == "--warmup" and v == 0))):
            raise DiagError(f"load: {name} must be a positive number")
    if a.sweep and a.sweep_factor <= 1:
        raise DiagError("load: --sweep-factor must be above 1")
    if a.sweep and not a.slo:
        raise DiagError("load: --sweep needs at least one --slo (the objective the rate must meet)")
    headers = tuple(_header(h) for h in a.header)
    bodies, ctype = _bodies(a.body, a.payloads)
    if ctype and not any(k.lower() == "content-type" for k, _ in headers):
        headers += (("Content-Type", ctype),)
    method = (a.method or ("POST" if bodies else "GET")).upper()
    rate = a.rate if a.rate or a.concurrency else 10.0
    warmup = a.warmup if a.warmup is not None else (0.5 if a.sweep else 1.0)
    return LoadSpec(url=a.url, rate=rate, concurrency=a.concurrency, duration=a.duration, warmup=warmup,
                    method=method, bodies=bodies, headers=headers, timeout=a.timeout, arrivals=a.arrivals,
                    slos=tuple(parse_slo(s) for s in a.slo), sweep=a.sweep, sweep_factor=a.sweep_factor,
                    sweep_max_steps=a.sweep_steps, sweep_refine=a.sweep_refine,
                    max_connections=a.max_connections, argv=tuple(argv))


def parse_load_args(words: str | list[str]) -> LoadSpec:
    """A LoadSpec from `diag load`'s words, e.g. `'http://127.0.0.1:8000/predict --rate 50 --slo p99<200ms'`."""
    argv = shlex.split(words) if isinstance(words, str) else list(words)
    p = _Parser(prog="diag load", add_help=False)
    add_load_arguments(p)
    return spec_from_args(p.parse_args(argv), argv)


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c in name for c in " \t\r\n") or any(c in value for c in "\r\n"):
        raise DiagError(f"load: --header must be 'Name: value' (got {redact_argv([text])[0]!r})")
    return name.strip(), value.strip()


def _read(path: str, what: str) -> bytes:
    try:
        if os.path.getsize(path) > MAX_BODY_BYTES:
            raise DiagError(f"load: {what} {path}: larger than {MAX_BODY_BYTES >> 20} MiB")
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise DiagError(f"load: {what} {path}: {exc.strerror or exc}") from None


def _bodies(body: str | None, payloads: str | None) -> tuple[tuple[bytes, ...], str | None]:
    """(bodies to cycle through, their content type)."""
    if body and payloads:
        raise DiagError("load: give --body or --payloads, not both")
    if payloads:
        out = []
        for n, line in enumerate(_read(payloads, "--payloads").decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.dumps(json.loads(line), separators=(",", ":")).encode())
            except ValueError:
                raise DiagError(f"load: --payloads {payloads}: line {n} is not JSON") from None
        if not out:
            raise DiagError(f"load: --payloads {payloads}: no JSON line in it")
        return tuple(out), "application/json"
    if body is None:
        return (), None
    data = _read(body, "--body") if os.path.isfile(body) else body.encode()
    ctype = "application/json" if data.lstrip()[:1] in (b"{", b"[") else None
    return (data,), ctype


def render_body(bodies: tuple[bytes, ...], i: int) -> bytes | None:
    """The body of request number `i`: the payloads in turn, `{i}` in a template replaced by i."""
    if not bodies:
        return None
    b = bodies[i % len(bodies)]
    return b.replace(b"{i}", str(i).encode()) if b"{i}" in b else b
