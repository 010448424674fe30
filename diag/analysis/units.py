"""How every view prints a value: one rendering per unit of the metric catalog.

Console, TUI, report data and the report's Jinja filters all call
`format_value(value, unit)`, so a number reads the same wherever a user looks.
Plain Python only (no rich, textual, plotly or pandas), so any view can import it.

One rendering per unit (diag.analysis.catalog.UNITS):

| unit | value | printed |
|---|---|---|
| missing | None, NaN, ±inf, not a number | `–` |
| ratio | 0.214 (a share of a whole) | `21.4%` |
| factor | 3.0 (how many times another value) | `3.00x` |
| s, ms, us | 0.00042 s, 2.5 ms, 40 us | adaptive: `420 µs`, `2.5 ms`, `40 µs`, `4.56 s`, `2m05s`, `1h02m` |
| bytes | 1_572_864 | SI (powers of 1000): `1.57 MB`; `512 B`, `3 GB` |
| bytes/s | 2.5e8 | `250 MB/s` |
| count | 12345, 1.5 | `12,345`, `1.5` |
| per_s | 250.0 | `250/s` |
| cores | 1.5 | `1.5 cores` |
| flag | 1, 0 | `yes`, `no` |

Numbers keep three significant digits; whole numbers stay whole, with thousands
separators. A unit outside the catalog (a time series' display unit such as
"GB", "MB/s" or "%" in percent points) prints as the number followed by it.
Strings pass through unchanged; booleans print as flags.
"""

from __future__ import annotations

import math
from typing import Any

MISSING = "–"

# Durations: the unit's size in seconds.
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
# Duration steps under a minute, largest first: (size in seconds, suffix).
_STEPS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_PREFIXES = ("B", "kB", "MB", "GB", "TB", "PB")


def as_number(value: Any) -> float | None:
    """`value` as a finite float, or None when it is missing (None, NaN, inf, not a number)."""
    if value is None or isinstance(value, str):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def is_missing(value: Any) -> bool:
    """True for None, NaN and infinities (pandas hands back NaN for missing cells)."""
    return as_number(value) is None and not isinstance(value, str)


def _sig3(v: float) -> str:
    """Three significant digits, no exponent for the sizes views show."""
    text = f"{v:.3g}"
    if "e" in text:  # 1e+03 after rounding, or a huge / tiny value
        return f"{v:,.0f}" if abs(v) >= 1 else text
    return text


def number(value: float) -> str:
    """A plain number: whole numbers whole ('12,345'), else three significant digits."""
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return _sig3(value)


def duration(seconds: float) -> str:
    """A duration, in the unit that keeps it readable: '420 µs', '3.1 ms', '4.56 s', '2m05s', '1h02m'."""
    a, sign = abs(seconds), "-" if seconds < 0 else ""
    if a == 0:
        return "0 s"
    if a >= 3600:
        return f"{sign}{int(a // 3600)}h{int(a % 3600 // 60):02d}m"
    if a >= 60:
        return f"{sign}{int(a // 60)}m{int(a % 60):02d}s"
    for i, (step, suffix) in enumerate(_STEPS):
        if a >= step or i == len(_STEPS) - 1:
            if float(f"{a / step:.3g}") >= 1000 and i > 0:  # 999.7 µs rounds up: '1 ms', not '1,000 µs'
                step, suffix = _STEPS[i - 1]
            return f"{sign}{_sig3(a / step)} {suffix}"
    raise AssertionError("unreachable")


def size(nbytes: float) -> str:
    """A byte count in SI units: '512 B', '1.57 MB', '3 GB'."""
    v = nbytes
    for prefix in _BYTE_PREFIXES:
        if prefix == "B" and abs(v) < 1000:
            return f"{v:.0f} B"
        if abs(float(f"{v:.3g}")) < 1000 or prefix == _BYTE_PREFIXES[-1]:
            return f"{_sig3(v)} {prefix}"
        v /= 1000
    return f"{_sig3(v)} {_BYTE_PREFIXES[-1]}"


def format_value(value: Any, unit: str = "") -> str:
    """`value` printed in `unit`, the same way in every view (see the module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = as_number(value)
    if v is None:
        return MISSING
    if unit == "ratio":
        return f"{v * 100:.1f}%"
    if unit == "factor":
        return f"{v:.2f}x"
    if unit in _SECONDS:
        return duration(v * _SECONDS[unit])
    if unit == "bytes":
        return size(v)
    if unit == "bytes/s":
        return size(v) + "/s"
    if unit == "count":
        return number(v)
    if unit == "per_s":
        return number(v) + "/s"
    if unit == "cores":
        return f"{number(v)} cores"
    if unit == "flag":
        return "yes" if v else "no"
    if unit == "%":  # percent points, as the time series carry them
        return f"{v:.1f}%"
    return f"{number(v)} {unit}".rstrip()


def column_unit(column: str) -> tuple[str, float]:
    """The unit a table column's name carries, and the factor into it.

    Analysis tables put units in names (`p50_ms`, `self_s`, `bytes`, `share`,
    `gb_per_s`); views format their cells with `format_value(v * factor, unit)`.
    """
    name = column.lower()
    if name.endswith("gb_per_s"):
        return "bytes/s", 1e9
    if name.endswith("mb_per_s"):
        return "bytes/s", 1e6
    if name.endswith("_per_s"):
        return "per_s", 1.0
    for suffix, unit in (("_s", "s"), ("_ms", "ms"), ("_us", "us"), ("_ns", "ns")):
        if name.endswith(suffix):
            return unit, 1.0
    if "bytes" in name:
        return "bytes", 1.0
    if name.endswith(("share", "frac", "fraction", "ratio")):
        return "ratio", 1.0
    return "count", 1.0


def format_cell(column: str, value: Any) -> str:
    """A table cell, formatted in the unit its column's name carries."""
    if isinstance(value, str) or isinstance(value, bool) or is_missing(value):
        return format_value(value, "")
    unit, factor = column_unit(column)
    return format_value(float(value) * factor, unit)
