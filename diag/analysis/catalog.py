"""Metric descriptions: the names rules may use, with units and one-line docs."""

from __future__ import annotations

from dataclasses import dataclass

# `ratio` is a share of a whole (0..1, printed as percent); `factor` is how many
# times one value is another (may exceed 1, printed as 3.00x). diag/analysis/units.py
# prints each unit the same way in every view.
# The latency percentiles every view and the load generator show (one list, light to import).
PERCENTILES = (50, 90, 95, 99)

UNITS = ("ratio", "factor", "s", "ms", "us", "bytes", "bytes/s", "count", "per_s", "cores", "flag")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    doc: str
