"""run.json: the run's manifest. Standard library only (the recorder writes it)."""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

SCHEMA = "diag.run/1"
MANIFEST = "run.json"


def write_manifest(run_dir: str, manifest: dict[str, Any], *, new: bool = False) -> None:
    """Write atomically (temp file + rename) so a kill never leaves half a file.

    The temporary file has a name of its own (pid and random part) and is created
    with O_EXCL|O_NOFOLLOW: never an existing file or a planted link. A failed
    write (disk full, file-size limit) removes it. `new`: run.json must not exist
    yet (FileExistsError otherwise); this is how a run claims its directory.
    Files get mode 0666 less the umask.
    """
    path = os.path.join(run_dir, MANIFEST)
    data = json.dumps(manifest, indent=2, default=str).encode()
    tmp = f"{path}.tmp.{os.getpid()}.{secrets.token_hex(4)}"
    _write_new(tmp, data)
    try:
        if new:
            os.link(tmp, path)  # fails if run.json exists, and never half-written
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _write_new(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink(path)
        raise


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_manifest(run_dir: str) -> dict[str, Any]:
    with open(os.path.join(run_dir, MANIFEST)) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("diag.run/"):
        raise ValueError("run.json has no diag.run schema")
    return data
