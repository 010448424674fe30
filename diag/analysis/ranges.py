"""Which rows of the `ranges` table are requests: decided here, once, for all of analysis."""

from __future__ import annotations

import pandas as pd

REQUEST = "request"  # the `kind` of a request range (the recorder and importers set it)


def requests(ranges: pd.DataFrame) -> pd.DataFrame:
    """The request rows of a `ranges` table (empty, with its columns, when there are none)."""
    return ranges[ranges["kind"] == REQUEST] if not ranges.empty else ranges
