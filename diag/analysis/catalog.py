"""Metric descriptions: the names rules may use, with units and one-line docs."""

from __future__ import annotations

from dataclasses import dataclass

UNITS = ("ratio", "s", "ms", "us", "bytes", "bytes/s", "count", "per_s", "cores", "flag")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    doc: str
