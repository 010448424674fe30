"""Number formatting for the TUI: values with their units, short and aligned."""

from __future__ import annotations

import math
from typing import Any


def is_missing(value: Any) -> bool:
    """True for None and NaN (pandas hands back both)."""
    if value is None:
        return True
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def seconds(value: Any) -> str:
    """A duration in seconds as '12.3 ms', '4.56 s', '1h02m'."""
    if is_missing(value):
        return "–"
    v = float(value)
    a = abs(v)
    if a >= 3600:
        return f"{int(v // 3600)}h{int(v % 3600 // 60):02d}m"
    if a >= 60:
        return f"{int(v // 60)}m{int(v % 60):02d}s"
    if a >= 1:
        return f"{v:.2f} s"
    if a >= 1e-3:
        return f"{v * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{v * 1e6:.3g} µs"
    return f"{v * 1e9:.3g} ns" if a else "0 s"


def bytes_(value: Any) -> str:
    """A byte count as '1.5 GB'."""
    if is_missing(value):
        return "–"
    v = float(value)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(v) < 1000 or unit == "TB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.3g} {unit}"
        v /= 1000
    return f"{v:.3g} TB"


def number(value: Any) -> str:
    """A plain number with three significant digits, integers kept whole."""
    if is_missing(value):
        return "–"
    if isinstance(value, bool):
        return str(value)
    v = float(value)
    if v.is_integer() and abs(v) < 1e7:
        return f"{int(v):,}"
    return f"{v:.3g}"


def value(v: Any, unit: str = "") -> str:
    """`v` shown in `unit` (the units Diagnosis.units and Evidence use)."""
    if is_missing(v):
        return "–"
    if isinstance(v, str):
        return v
    u = (unit or "").lower()
    if u in ("ratio", "share", "fraction"):
        return f"{float(v) * 100:.1f}%"
    if u in ("%", "percent", "pct"):
        return f"{float(v):.1f}%"
    if u in ("s", "seconds"):
        return seconds(v)
    if u in ("ms",):
        return seconds(float(v) / 1e3)
    if u in ("us", "µs"):
        return seconds(float(v) / 1e6)
    if u in ("ns",):
        return seconds(float(v) / 1e9)
    if u in ("bytes", "b"):
        return bytes_(v)
    if u in ("bytes/s", "b/s", "bps"):
        return bytes_(v) + "/s"
    return f"{number(v)} {unit}".rstrip()


def cell(column: str, v: Any) -> str:
    """A DataFrame cell, formatted from the unit its column name carries (`p50_s`, `bytes`, `share`)."""
    if is_missing(v):
        return "–"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "yes" if v else "no"
    name = column.lower()
    if name.endswith("_per_s"):
        return number(v)
    if name.endswith(("_s", "(s)")):
        return seconds(v)
    if name.endswith(("_ms", "(ms)")):
        return seconds(float(v) / 1e3)
    if name.endswith(("_ns", "(ns)")):
        return seconds(float(v) / 1e9)
    if name.endswith(("_us", "(us)")):
        return seconds(float(v) / 1e6)
    if "bytes" in name and "per" not in name:
        return bytes_(v)
    if name.endswith(("share", "_pct", "pctg", "frac", "ratio")):
        f = float(v)
        return f"{f:.1f}%" if name.endswith(("_pct", "pctg")) else f"{f * 100:.1f}%"
    return number(v)


def frame(text: str, cwd: str = "") -> str:
    """A stack frame 'fn (/long/path/site-packages/torch/x.py:12)' with its path shortened:
    relative to the package root or the run's working directory."""
    if "(" not in text or not text.endswith(")"):
        return text
    fn, _, where = text[:-1].rpartition(" (")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            where = where.rsplit(marker, 1)[1]
            break
    else:
        if cwd and where.startswith(cwd.rstrip("/") + "/"):
            where = where[len(cwd.rstrip("/")) + 1:]
    return f"{fn} ({where})"
