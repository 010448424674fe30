"""A DataTable that shows a DataFrame, cells formatted from their column units, filterable."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from rich.text import Text
from textual.widgets import DataTable

from diag.analysis.units import format_cell


def header(column: str) -> str:
    """A column name for display: 'p50_s' -> 'p50', 'dur_ns' -> 'dur', 'gb_per_s' -> 'GB/s'."""
    if column.endswith("_per_s"):
        return column[: -len("_per_s")].replace("gb", "GB").replace("mb", "MB") + "/s"
    for suffix in ("_s", "_ns", "_ms", "_us"):
        if column.endswith(suffix):
            return column[: -len(suffix)]
    return column


def frame_rows(df: pd.DataFrame, columns: Sequence[str]) -> list[list[str]]:
    """Every row of `df` as display strings, in `columns` order."""
    return [[format_cell(c, v) for c, v in zip(columns, row, strict=True)] for row in df[list(columns)].itertuples(index=False)]


class FrameTable(DataTable):
    """Rows of a DataFrame; `apply_filter(text)` keeps rows where any cell holds `text`."""

    def __init__(self, df: pd.DataFrame | None = None, columns: Sequence[str] | None = None,
                 max_cell: int = 60, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.max_cell = max_cell
        self._rows: list[list[str]] = []
        self._shown: list[list[str]] = []
        self._filter = ""
        self._pending = (df, columns)

    def on_mount(self) -> None:
        df, columns = self._pending
        if df is not None:
            self.set_frame(df, columns)

    def set_frame(self, df: pd.DataFrame, columns: Sequence[str] | None = None) -> None:
        """Show `df` (only `columns` if given, those present)."""
        cols = [c for c in (columns or list(df.columns)) if c in df.columns]
        self.clear(columns=True)
        for c in cols:
            numeric = pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
            self.add_column(Text(header(c), justify="right" if numeric else "left"), key=c)
        self._numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
                         for c in cols]
        self._rows = frame_rows(df, cols)
        self._refill()

    def apply_filter(self, text: str) -> int:
        """Keep rows holding `text` (case-insensitive); returns how many are shown."""
        self._filter = text.strip().lower()
        return self._refill()

    def shown_row(self, index: int) -> list[str]:
        """The full, unclipped cells of the row shown at `index`."""
        return self._shown[index] if 0 <= index < len(self._shown) else []

    def _refill(self) -> int:
        self.clear()
        self._shown = [row for row in self._rows
                       if not self._filter or any(self._filter in c.lower() for c in row)]
        for row in self._shown:
            cells = [Text(self._clip(c), justify="right" if num else "left") for c, num in zip(row, self._numeric, strict=True)]
            self.add_row(*cells)
        return len(self._shown)

    def _clip(self, s: str) -> str:
        return s if len(s) <= self.max_cell else s[: self.max_cell - 1] + "…"
