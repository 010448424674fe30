"""The diagnosis as JSON: the contract of `diag analyze RUN --json` (schema diag.diagnosis/1)."""

from __future__ import annotations

import json

from diag.engine.diagnosis import Diagnosis


def dumps(d: Diagnosis, indent: int | None = 2) -> str:
    """The JSON text: strict JSON (no NaN or Infinity), one object."""
    return json.dumps(d.to_json(), indent=indent, allow_nan=False, default=str)


def to_json_text(d: Diagnosis) -> str:
    """What `diag analyze RUN --json` prints."""
    return dumps(d)
