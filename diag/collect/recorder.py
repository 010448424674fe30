"""The in-process recorder that hooks write through (placeholder until hooks land)."""

from __future__ import annotations

from typing import Any

_ACTIVE: Any = None


def active_recorder() -> Any:
    return _ACTIVE
