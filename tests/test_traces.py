"""The public-trace corpus: every trace gets its expected label, or an honest decline."""

from __future__ import annotations

import os

import pytest
from traces_expected import DECLINE, EXPECTED, KNOWN_MISSES

from diag.engine.diagnose import diagnose
from diag.store.importers import import_trace

TRACES = os.path.join(os.path.dirname(__file__), "data", "traces")
LIVE_ONLY = ("diag profile", "--duration")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_trace_verdict(name: str) -> None:
    if name in KNOWN_MISSES:
        pytest.xfail(KNOWN_MISSES[name])
    expected, why = EXPECTED[name]
    d = diagnose(import_trace(os.path.join(TRACES, name)))
    if expected == DECLINE:
        assert d.primary is None, f"{name}: {d.primary} ({why})"
        declined = [f for f in d.findings if f.rule == "verdict.trace_declined"]
        assert declined and "No verdict for this trace: " in declined[0].title, [f.rule for f in d.findings]
    else:
        assert d.primary == expected, f"{name}: {d.primary}, expected {expected} ({why})"
    text = " ".join([f.title for f in d.findings] + [r.text for f in d.findings for r in f.recommendations])
    assert not any(s in text for s in LIVE_ONLY), text  # advice a file cannot follow


def test_corpus_is_small_and_listed() -> None:
    total = 0
    listed = open(os.path.join(TRACES, "SOURCES.md"), encoding="utf-8").read()
    for root, _, files in os.walk(TRACES):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
            rel = os.path.relpath(os.path.join(root, f), TRACES)
            if rel.endswith(".json.gz"):
                assert rel in EXPECTED and rel in listed, rel
    assert total < 4 << 20
