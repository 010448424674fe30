"""The streaming trace reader (diag/store/trace_stream.py) reads what json.loads reads."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from diag.errors import DiagError
from diag.store import safe
from diag.store.kineto import load_trace, parse_events, parse_trace, read_kineto
from diag.store.trace_stream import stream_trace

TRACES = os.path.join(os.path.dirname(__file__), "data", "traces")
TRACE = {"deviceProperties": [{"id": 0, "name": "H100"}],
         "traceEvents": [{"ph": "X", "cat": "kernel", "name": f"gemm_{i % 3}", "ts": 10.5 + i, "dur": 0.25,
                          "args": {"correlation": i, "grid": [1, 2, 3], "note": "é✓"}} for i in range(200)]
                        + [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10 + i, "dur": 0.1,
                            "args": {"correlation": i}} for i in range(200)],
         "traceName": "t", "baseTimeNanoseconds": 1_700_000_000_123_456_789}


def _stream(path: str) -> tuple[list, dict]:
    top: dict = {}
    return list(stream_trace(path, top)), top


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_stream_equals_json_loads_at_any_chunk_size(tmp_path, monkeypatch, chunk):
    # tiny chunks cut numbers ("1." of "1.5"), strings and multi-byte characters everywhere
    monkeypatch.setattr(safe, "CHUNK", chunk)  # the file is read in chunks by safe.chunks
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TRACE, ensure_ascii=False, indent=1), encoding="utf-8")
    events, top = _stream(str(path))
    assert events == TRACE["traceEvents"]
    assert top == {k: v for k, v in TRACE.items() if k != "traceEvents"}


def test_gzip_and_bare_list(tmp_path):
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(TRACE).encode()))
    assert _stream(str(gz))[0] == TRACE["traceEvents"]
    bare = tmp_path / "b.json"
    bare.write_text(json.dumps(TRACE["traceEvents"]))
    assert _stream(str(bare)) == (TRACE["traceEvents"], {})


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(TRACES) if n.endswith((".json", ".json.gz"))))
def test_streamed_parse_equals_whole_file_parse(name):
    path = os.path.join(TRACES, name)
    try:
        whole = parse_trace(load_trace(path))
    except (ValueError, DiagError):
        pytest.skip("not a readable trace")
    top: dict = {}
    assert parse_events(stream_trace(path, top), top) == whole


@pytest.mark.parametrize("text", ['{"traceEvents": [{"ts": NaN}]}', '{"traceEvents": [{"ts": 1e400}]}',
                                  '{"traceEvents": [' + "[" * 50_000 + "]" * 50_000 + "]}",
                                  '{"traceEvents": [{"ts": 1}]', '{"traceEvents": []} x', "5",
                                  '{"traceEvents": 3}', '{"traceEvents": [{"ts": 1}], "base": 17'])
def test_hostile_input_is_one_line_error(tmp_path, text):
    path = tmp_path / "h.json"
    path.write_text(text)
    with pytest.raises(DiagError) as err:
        read_kineto(str(path))
    assert "\n" not in str(err.value)


def test_base_time_after_the_events_is_applied(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TRACE))
    parsed = parse_events(stream_trace(str(path), top := {}), top)
    assert parsed.kernels[0]["ts_ns"] == 1_700_000_000_123_456_789 + 10_500
    assert parsed.kernels[0]["launch_ns"] == 1_700_000_000_123_456_789 + 10_000
    assert len(parsed.kernels) == 200
