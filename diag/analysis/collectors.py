"""Why a run holds no data from one of its collectors: the one text every view shows."""

from __future__ import annotations

from typing import Any

# What each collector records, as the notes name it.
DATA: dict[str, str] = {
    "gpu": "GPU series",
    "host": "host samples",
    "hooks": "steps",
    "stacks": "Python stack samples",
    "kernels": "kernel data",
}


def missing_data_note(collectors: dict[str, Any], name: str) -> str:
    """'No kernel data: the kernels collector was off (no CUDA device).', from run.json's collectors."""
    what = DATA.get(name, f"{name} data")
    c = collectors.get(name)
    if not isinstance(c, dict) or not c:
        return f"No {what}: the {name} collector did not report."
    status = c.get("status") or "?"
    if status == "ok":
        return f"No {what}: the {name} collector ran but recorded none."
    reason = c.get("reason")
    return f"No {what}: the {name} collector was {status}" + (f" ({reason})." if reason else ".")
