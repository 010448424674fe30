"""The diagnosis as JSON: the contract of `diag analyze RUN --json` (schema diag.diagnosis/1)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from diag.engine.diagnosis import Diagnosis


def to_json(d: Diagnosis) -> dict[str, Any]:
    """The JSON object (DESIGN.md contract)."""
    return d.to_json()


def dumps(d: Diagnosis, indent: int | None = 2) -> str:
    """The JSON text: strict JSON (no NaN or Infinity), one object."""
    return json.dumps(d.to_json(), indent=indent, allow_nan=False, default=str)


def to_json_text(d: Diagnosis) -> str:
    """What `diag analyze RUN --json` prints."""
    return dumps(d)


def write(d: Diagnosis, out: TextIO) -> None:
    """Write the JSON object and a newline to `out` (stdout for `--json`)."""
    out.write(dumps(d) + "\n")
