"""Secrets out of everything diag stores or shows: command lines, environment, py-spy files.

One policy, applied before a value is written (run.json, raw meta rows, py-spy
files) so that no later reader, view or report can leak it:

- a flag whose name has a secret word hides its value (`--password x`, `--token=x`);
- `name=value` and `Name: value` (HTTP headers) with a secret word in the name;
- credentials inside URLs (`redis://user:pass@host` -> `redis://***@host`, `?token=x`);
- environment variables whose name has a secret word.

A name has a secret word when one of its parts (split at `-`, `_`, `.`) starts
or ends with one of SECRET_WORDS (`PASS`, `PWD`, `CRED`, `SECRET`, `TOKEN`,
`KEY`, `AUTH`, ...), except a few common harmless words (`--tokenizer`,
`--max-tokens`). Redaction errs on hiding too much. `--no-redact` turns it off.

Recording side: standard library only (the recorder in the target imports it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

MASK = "***"
SECRET_WORDS = ("pass", "pwd", "cred", "secret", "token", "key", "auth", "cookie", "private", "signature",
                "session", "bearer", "apikey")
# Parts that contain a secret word but name no secret (inference CLIs use them a lot).
HARMLESS = frozenset({"tokenizer", "tokenizers", "tokens", "passthrough", "keys", "sessions"})

_PARTS = re.compile(r"[-_.\s]+")
_URL_CREDS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_QUERY = re.compile(r"([?&;])([^=&#\s]+)=([^&#\s]*)")
_HEADER = re.compile(r"^(?P<name>[A-Za-z0-9-]+):\s*(?P<value>.+)$", re.S)
_ASSIGN = re.compile(r"^(?P<name>-{0,2}[A-Za-z0-9_.-]+)=(?P<value>.*)$", re.S)


def is_secret_name(name: str) -> bool:
    """Whether a flag, variable or header name suggests its value is a secret."""
    for part in _PARTS.split(name.strip("-").lower()):
        if not part or part in HARMLESS:
            continue
        if any(part.startswith(w) or part.endswith(w) for w in SECRET_WORDS):
            return True
    return False


def redact_value(value: str) -> str:
    """`value` with the credentials of any URL in it hidden (`user:pass@`, `?token=x`)."""
    value = _URL_CREDS.sub(lambda m: f"{m.group('scheme')}{MASK}@", value)
    if "://" in value:
        value = _QUERY.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(m.group(2))
                           else m.group(0), value)
    return value


def _redact_arg(arg: str) -> str:
    m = _ASSIGN.match(arg)
    if m and is_secret_name(m.group("name")):
        return f"{m.group('name')}={MASK}"
    if m:  # --header=Authorization: x
        return f"{m.group('name')}={_redact_arg(m.group('value'))}"
    h = _HEADER.match(arg)
    if h and not arg.startswith("-") and "://" not in arg and is_secret_name(h.group("name")):
        return f"{h.group('name')}: {MASK}"
    return redact_value(arg)


def _hides_next(arg: str) -> bool:
    """`--password VALUE`, and in free text `Authorization: Bearer VALUE`: the value comes next."""
    if arg.startswith("-") and "=" not in arg:
        return is_secret_name(arg)
    if arg.endswith(":") and "://" not in arg:
        return is_secret_name(arg[:-1])
    return arg.lower() in ("bearer", "basic")


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with secret values replaced by MASK (see the module docstring)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next and not arg.startswith("--"):
            out.append(MASK)
            hide_next = arg.lower() in ("bearer", "basic")  # `Authorization: Bearer TOKEN`
            continue
        hide_next = _hides_next(arg)
        out.append(_redact_arg(arg))
    return out


def redact_text(text: str) -> str:
    """Free text holding a command line (a py-spy process name, a log line): redacted word by word."""
    words = re.split(r"(\s+)", text)
    tokens = redact_argv(w for w in words[::2])
    words[::2] = tokens
    return "".join(words)


def redact_env(environ: dict[str, str]) -> dict[str, str]:
    """Environment variables with secret-named values replaced by MASK and URL credentials hidden."""
    return {k: MASK if is_secret_name(k) else redact_value(v) for k, v in environ.items()}


# py-spy (--subprocesses) names each process's root frame `process N:"<its command line>"`.
_ROOT_NAME = re.compile(rb'"name":"process (\d+):((?:[^"\\]|\\.)*)"', re.S)
MAX_NAME = 1 << 21  # a command line is at most ARG_MAX (2 MiB) long


def _root_name(m: re.Match[bytes]) -> bytes:
    try:
        text = json.loads(b'"' + m.group(2) + b'"')
    except ValueError:
        return b'"name":"process ' + m.group(1) + b':' + MASK.encode() + b'"'
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = f'"{redact_text(text[1:-1])}"'
    else:
        text = redact_text(text)
    return b'"name":' + json.dumps(f"process {int(m.group(1))}:{text}").encode()


def redact_pyspy_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """py-spy's chrometrace bytes, streamed, with the command lines in root frame names redacted."""
    buf = b""
    for chunk in chunks:
        buf += chunk
        # Replace whole matches only; keep a tail that may hold the start of an unfinished one.
        done = 0
        parts: list[bytes] = []
        for m in _ROOT_NAME.finditer(buf):
            parts += [buf[done:m.start()], _root_name(m)]
            done = m.end()
        cut = buf.rfind(b'"name":"process ', done)
        if cut < 0 or len(buf) - cut > MAX_NAME:
            cut = max(done, len(buf) - len(b'"name":"process '))
        parts.append(buf[done:cut])
        buf = buf[cut:]
        yield b"".join(parts)
    yield _ROOT_NAME.sub(_root_name, buf)


def redact_pyspy_bytes(data: bytes, chunk: int = 16 << 20) -> bytes:
    """`redact_pyspy_chunks` over bytes in memory (tests, small files)."""
    return b"".join(redact_pyspy_chunks(data[i:i + chunk] for i in range(0, len(data), chunk)))


def redact_pyspy_file(path: str, chunk: int = 16 << 20) -> None:
    """Rewrite one finished py-spy file (trace or log) with its command lines redacted, atomically."""
    import os
    import secrets

    tmp = f"{path}.redact.{secrets.token_hex(4)}"
    with open(path, "rb") as src:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        try:
            with os.fdopen(fd, "wb") as dst:
                if path.endswith(".json"):
                    for out in redact_pyspy_chunks(iter(lambda: src.read(chunk), b"")):
                        dst.write(out)
                else:  # a log: line by line
                    for line in src:
                        dst.write(redact_text(line.decode("utf-8", "replace")).encode())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
