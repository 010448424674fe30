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


# -- reading: the run reader hands every consumer typed, validated fields -----------------------

# top-level key -> kind; a value of another kind is replaced by the kind's empty value and the
# key listed in `invalid_fields`, so views and analysis never meet a 5 where a dict belongs.
FIELDS: dict[str, str] = {
    "run_id": "str", "cwd": "str", "command": "strs", "start_ns": "int", "end_ns": "int",
    "duration_s": "float", "exit_code": "int", "signal": "int_or_str", "partial": "bool",
    "host": "dict", "gpu": "dict", "versions": "dict", "env": "dict", "collectors": "dicts",
    "options": "dict", "imported_from": "dict",
}
_EMPTY: dict[str, Any] = {"str": "", "strs": [], "int": None, "float": None, "int_or_str": None,
                          "bool": False, "dict": {}, "dicts": {}}
HOST_NUMBERS = ("cores_logical", "cores_physical", "ram_bytes")
DEVICE_NUMBERS = ("index", "memory_bytes")


def read_manifest(run_dir: str) -> dict[str, Any]:
    """run.json, typed (FIELDS); DiagError, one line, if it is no regular file of JSON with a
    diag.run schema. Fields of the wrong type are emptied and named in `invalid_fields`."""
    from diag.errors import DiagError
    from diag.store.safe import MAX_SMALL_BYTES, load_json

    path = os.path.join(run_dir, MANIFEST)
    try:
        data = load_json(path, MAX_SMALL_BYTES, follow=False)
    except DiagError as exc:
        raise DiagError(f"corrupt manifest {exc.message}") from None
    if not isinstance(data, dict) or not isinstance(data.get("schema"), str) \
            or not data["schema"].startswith("diag.run/"):
        raise DiagError(f"corrupt manifest {path}: no diag.run schema")
    return typed_manifest(data)


def typed_manifest(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every known field of its documented kind (see FIELDS)."""
    from diag.store.safe import int64, number

    out = dict(data)
    invalid: list[str] = []
    for key, kind in FIELDS.items():
        if key not in data:
            continue
        value = _typed(data[key], kind)
        if value is _BAD:
            invalid.append(key)
            value = _EMPTY[kind] if not isinstance(_EMPTY[kind], (list, dict)) else type(_EMPTY[kind])()
        out[key] = value
    host, gpu = out.get("host"), out.get("gpu")
    if isinstance(host, dict):
        for k in HOST_NUMBERS:
            if k in host and number(host[k]) is None:
                host[k] = None
    if isinstance(gpu, dict) and "devices" in gpu:
        devices = gpu["devices"] if isinstance(gpu["devices"], list) else []
        gpu["devices"] = [{**d, **{k: int64(d[k]) for k in DEVICE_NUMBERS if k in d},
                           **({"name": str(d["name"])} if "name" in d else {})}
                          for d in devices if isinstance(d, dict)]
        if "count" in gpu and int64(gpu["count"]) is None:
            gpu["count"] = len(gpu["devices"])
    for c in (out.get("collectors") or {}).values():
        for k in ("status", "reason"):
            if k in c and not isinstance(c[k], str):
                c[k] = str(c[k])
        if "start_ns" in c:
            c["start_ns"] = int64(c["start_ns"])
    if invalid:
        out["invalid_fields"] = invalid
    return out


_BAD = object()


def _typed(value: Any, kind: str) -> Any:
    from diag.store.safe import int64, number

    if value is None and kind in ("int", "float", "int_or_str"):
        return None
    if kind == "str":
        return value if isinstance(value, str) else _BAD
    if kind == "strs":
        return [str(v) for v in value] if isinstance(value, list) else _BAD
    if kind == "int":
        v = int64(value)
        return _BAD if v is None or isinstance(value, float) and not value.is_integer() else v
    if kind == "float":
        v = number(value)
        return float(v) if v is not None and not isinstance(v, bool) else _BAD
    if kind == "int_or_str":
        return value if isinstance(value, str) else (int64(value) if int64(value) is not None else _BAD)
    if kind == "bool":
        return value if isinstance(value, bool) else _BAD
    if kind == "dict":
        return dict(value) if isinstance(value, dict) else _BAD
    if kind == "dicts":  # collectors: name -> dict
        return {k: dict(v) for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else _BAD
    raise AssertionError(kind)
