"""Copy time hidden behind kernels on another stream is not exposed copy time."""

from __future__ import annotations

import numpy as np

from diag.analysis.gpu import _uncovered


def arr(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def test_copy_overlapped_by_kernels_is_not_exposed():
    # copy 0-30 on a side stream, kernels 10-40 and 50-60: only 0-10 runs alone
    assert _uncovered(arr(0), arr(30), arr(10, 50), arr(40, 60), 0, 100) == 10


def test_overlapping_copies_count_once_and_clip_to_window():
    # two copies 0-20 and 10-30 (union 0-30), no kernels, window 5-25
    assert _uncovered(arr(0, 10), arr(20, 30), arr(), arr(), 5, 25) == 20


def test_no_copies():
    assert _uncovered(arr(), arr(), arr(0), arr(10), 0, 10) == 0
