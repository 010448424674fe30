"""Strategies and checks shared by the fuzz tests: hostile values where readers expect numbers,
text, lists and tables; and the one contract every reader keeps."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import strategies as st

from diag.errors import DiagError

# numbers a reader must survive: huge, tiny, negative, non-finite, past int64
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30, 1 << 100]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 1e-308, 5e-324, 1.5, 1e18, 9.3e18]),
)
TEXT = st.one_of(st.text(max_size=30), st.sampled_from(["[/]", "[bold]x", "{x:>999999}", "ProfilerStep#7",
                                                         "request", "\x00", "\ud7ff", "nan", "1e400"]))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def json_text(value: Any) -> str:
    """JSON as Python writes it: NaN, Infinity and huge integers included, as a hostile writer would."""
    import json

    return json.dumps(value, allow_nan=True)


def deep(n: int) -> str:
    """A JSON array nested n deep."""
    return "[" * n + "]" * n


def one_line(exc: DiagError) -> None:
    assert exc.message and "\n" not in exc.message and "Traceback" not in exc.message, exc.message


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    t = time.monotonic()
    yield
    assert time.monotonic() - t < seconds, f"took {time.monotonic() - t:.1f} s"


def result_or_one_line_error(fn: Callable[[], Any], seconds: float = 10.0) -> Any:
    """fn()'s result, or None after a one-line DiagError; any other exception fails the test."""
    with within(seconds):
        try:
            return fn()
        except DiagError as exc:
            one_line(exc)
            return None


def finite_or_none(v: Any) -> bool:
    return v is None or not isinstance(v, float) or math.isfinite(v)
