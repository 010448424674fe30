"""Hypothesis profiles for the fuzz suite.

CI (the default): derandomized, a small example budget, so the suite is the same on
every run and stays well under 3 minutes on 2 cores. Locally, DIAG_FUZZ_EXAMPLES=2000
runs more examples, with random seeds (DIAG_FUZZ_RANDOM=1) to look for new failures.
"""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))  # fuzz_support

settings.register_profile(
    "diag-fuzz",
    max_examples=int(os.environ.get("DIAG_FUZZ_EXAMPLES", "40")),
    derandomize=not os.environ.get("DIAG_FUZZ_RANDOM"),
    deadline=None,  # pytest-timeout bounds each test instead: a shared CI box has slow moments
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)
settings.load_profile("diag-fuzz")
