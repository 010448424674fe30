"""Fuzz: run.json, raw JSON lines, Kineto JSON, Nsight SQLite and rules TOML (issue 9).

Every input ends in a result or one line of DiagError (exit 2 through the CLI),
within a time bound: never a traceback, a hang or a memory blow-up.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile

import pytest
from fuzz_support import (
    JSON,
    NUMBERS,
    SCALARS,
    TEXT,
    deep,
    finite_or_none,
    json_text,
    result_or_one_line_error,
)
from hypothesis import given
from hypothesis import strategies as st

from diag.cli import main
from diag.store.manifest import FIELDS, SCHEMA

# each example is bounded in fuzz_support.within; the whole test by the example budget
pytestmark = pytest.mark.timeout(max(120, 2 * int(os.environ.get("DIAG_FUZZ_EXAMPLES", "40"))))
T0 = 1_700_000_000_000_000_000


def base_manifest() -> dict:
    return {"schema": SCHEMA, "run_id": "fuzz", "command": ["python", "app.py"], "cwd": "/app",
            "start_ns": T0, "end_ns": T0 + 2_000_000_000, "duration_s": 2.0, "exit_code": 0, "signal": None,
            "partial": False, "host": {"cores_logical": 4}, "gpu": {"count": 0, "devices": []}, "versions": {},
            "env": {}, "collectors": {"hooks": {"status": "ok"}, "stacks": {"status": "ok", "start_ns": T0}},
            "options": {}}


STEP = {"ts_ns": T0 + 100_000_000, "dur_ns": 15_000_000, "pid": 1, "tid": 1, "source": "torch", "seq": 0,
        "batch": 8, "gpu_ns": -1, "syncs": 0, "in_window": False, "weight": 1}


def good_steps(n: int = 40) -> list[str]:
    return [json.dumps({**STEP, "ts_ns": T0 + 100_000_000 + i * 20_000_000, "seq": i}) for i in range(n)]


def write_run(root: str, manifest_text: str, raw: dict[str, list[str]] | None = None) -> str:
    os.makedirs(os.path.join(root, "raw"))
    with open(os.path.join(root, "run.json"), "w") as f:
        f.write(manifest_text)
    for table, lines in (raw or {"steps": good_steps()}).items():
        with open(os.path.join(root, "raw", f"{table}.1.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return root


def analyze(path: str):
    """open_any + diagnose, the path of `diag analyze`, and the views' use of the manifest."""
    from diag.engine import diagnose
    from diag.store.importers import open_any
    from diag.tui.views.overview import run_line
    from diag.tui.views.run_info import manifest_tables
    from diag.views.json_view import dumps

    run = open_any(path)
    run_line(run.manifest)
    manifest_tables(run.manifest)
    assert isinstance(run.duration_s, float)
    json.loads(dumps(diagnose(run)))
    return run


def cli_rc(path: str, capsys, *extra: str) -> int:
    rc = main(["analyze", path, "--json", *extra])
    err = capsys.readouterr().err
    assert rc in (0, 2), rc
    if rc == 2:
        assert err.startswith("diag: ") and err.count("\n") == 1, err
    return rc


# -- run.json ----------------------------------------------------------------------------------

@given(changes=st.dictionaries(st.sampled_from(sorted(FIELDS) + ["schema", "other"]), JSON, max_size=5))
def test_run_json_fields(changes: dict) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = write_run(os.path.join(d, "run"), json_text({**base_manifest(), **changes}))
        run = result_or_one_line_error(lambda: analyze(path))
        if run is not None:
            m = run.manifest
            assert isinstance(m.get("command", []), list) and isinstance(m.get("collectors", {}), dict)
            assert all(finite_or_none(m.get(k)) for k in ("start_ns", "end_ns", "duration_s"))


@given(text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
                      st.sampled_from([deep(100_000), '{"schema": "diag.run/1", "a": ' + deep(50_000) + "}",
                                       '{"schema": "diag.run/1", "start_ns": NaN}', "", "null", "[]"])))
def test_run_json_text(text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = write_run(os.path.join(d, "run"), text)
        result_or_one_line_error(lambda: analyze(path))


# -- raw JSON lines ----------------------------------------------------------------------------

RAW_LINE = st.one_of(
    st.dictionaries(st.sampled_from(sorted(STEP) + ["shapes", "model", "x"]), JSON, max_size=6)
    .map(lambda d: json_text({**STEP, **d})),
    JSON.map(json_text),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
    st.sampled_from([deep(100_000), "5", '{"ts_ns": 1e400}', '{"ts_ns": NaN}', "{" * 1000]),
)


@given(table=st.sampled_from(["steps", "ranges", "events", "host", "gpu", "copies", "syncs", "windows", "meta"]),
       lines=st.lists(RAW_LINE, max_size=8))
def test_raw_json_lines(table: str, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        raw = {"steps": good_steps(), table: lines} if table != "steps" else {"steps": good_steps() + lines}
        path = write_run(os.path.join(d, "run"), json.dumps(base_manifest()), raw)
        run = result_or_one_line_error(lambda: analyze(path))
        if run is not None and table == "steps":
            assert len(run.table("steps")) >= 40


# -- Kineto JSON -------------------------------------------------------------------------------

EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "B", "i"]),
     "cat": st.sampled_from(["kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "cpu_op", "python_function"])},
    optional={"ts": st.one_of(NUMBERS, SCALARS), "dur": st.one_of(NUMBERS, SCALARS),
              "name": st.one_of(TEXT, st.sampled_from(["ProfilerStep#3", "ProfilerStep#" + "9" * 40, "request",
                                                       "Memcpy HtoD (Pageable -> Device)"]), JSON),
              "pid": JSON, "tid": JSON, "args": JSON})


@given(events=st.lists(EVENT, max_size=12),
       top=st.dictionaries(st.sampled_from(["deviceProperties", "baseTimeNanoseconds", "traceEvents", "x"]),
                           JSON, max_size=2),
       gz=st.booleans())
def test_kineto_json(events: list, top: dict, gz: bool) -> None:
    import gzip

    data = json_text({"traceEvents": events, **top}).encode()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json" + (".gz" if gz else ""))
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if gz else data)
        run = result_or_one_line_error(lambda: analyze(path))
        if run is not None:
            for name in ("kernels", "steps", "ranges"):
                df = run.table(name)
                assert df.empty or df["ts_ns"].abs().max() < 2**63


@given(data=st.one_of(st.binary(max_size=300), st.sampled_from([b"\x1f\x8b" + b"\x00" * 40, deep(100_000).encode()])))
def test_kineto_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        with open(path, "wb") as f:
            f.write(data)
        result_or_one_line_error(lambda: analyze(path))


# -- Nsight SQLite -----------------------------------------------------------------------------

SQL_VALUE = st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=False),
                      st.text(max_size=10), st.binary(max_size=10),
                      st.integers(min_value=0, max_value=5_000_000))
NSYS_TABLES = {
    "StringIds": ["id", "value"],
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "streamId", "globalPid", "demangledName",
                                   "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "streamId", "globalPid", "bytes", "copyKind",
                                   "srcKind", "dstKind"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "deviceId", "streamId", "bytes"],
    "NVTX_EVENTS": ["start", "end", "eventType", "globalTid", "text", "textId", "domainId"],
    "TARGET_INFO_SESSION_START_TIME": ["utcEpochNs"],
}


@st.composite
def nsys_db(draw) -> dict:
    tables = draw(st.lists(st.sampled_from(sorted(NSYS_TABLES)), unique=True, min_size=1))
    out = {}
    for t in tables:
        cols = NSYS_TABLES[t]
        if len(cols) > 1 and draw(st.booleans()):  # sometimes a column is missing
            gone = draw(st.sampled_from(cols))
            cols = [c for c in cols if c != gone]
        rows = draw(st.lists(st.tuples(*[SQL_VALUE for _ in cols]), max_size=5))
        out[t] = (cols, rows, draw(st.sampled_from(["table", "table", "table", "view"])))
    return out


@given(db=nsys_db())
def test_nsight_sqlite(db: dict) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "report#1.sqlite")
        con = sqlite3.connect(path)
        for name, (cols, rows, kind) in db.items():
            target = name if kind == "table" else f"t_{name}"
            con.execute(f"CREATE TABLE {target} ({', '.join(cols)})")
            con.executemany(f"INSERT INTO {target} VALUES ({', '.join('?' * len(cols))})", rows)
            if kind == "view":
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM {target}")
        con.commit()
        con.close()
        run = result_or_one_line_error(lambda: analyze(path))
        assert sorted(os.listdir(d)) == ["report#1.sqlite"]  # nothing created beside it
        if run is not None:
            assert run.table("kernels").empty or run.table("kernels")["ts_ns"].abs().max() < 2**63


# -- rules TOML --------------------------------------------------------------------------------

METRICS = ["steady.copy_share", "steady.gpu_busy", "steady.step_p50_ms", "run.duration_s"]
EXPR = st.recursive(
    st.one_of(st.sampled_from(METRICS), st.integers(min_value=-10**6, max_value=10**6).map(str),
              st.sampled_from(["9**3999999", "10**400", "1e400", "'x'", "value('steady.copy_share', 0)",
                               "has('steady.gpu_busy')", "__import__('os')", "True", "None", "9" * 50])),
    lambda e: st.one_of(
        st.tuples(e, st.sampled_from(["+", "-", "*", "/", "**", "%", "//", " and ", " or ", " < ", " >= ", " == ",
                                      "<<", "|", " in "]), e).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
        e.map(lambda x: f"not {x}"), e.map(lambda x: f"-{x}"),
        st.tuples(st.sampled_from(["min", "max", "abs", "ramp", "clamp", "amdahl", "limit", "eval"]),
                  st.lists(e, min_size=1, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})")),
    max_leaves=8)
TEMPLATE = st.one_of(
    st.sampled_from(["{steady.copy_share:.0%}", "{steady.copy_share:>2000000000}", "{steady.gpu_busy:.999f}",
                     "{run.duration_s:{run.duration_s}}", "{gain:,.2f}x", "{nope}", "{", "}", "{0}", "{!r}",
                     "{steady.copy_share!r:>10}", "[/] {score}"]),
    TEXT)
TOML_VALUE = st.one_of(EXPR, TEMPLATE, st.integers(), st.booleans(), st.lists(st.sampled_from(METRICS), max_size=2))


def toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON strings are TOML basic strings
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


@st.composite
def rule_file(draw) -> str:
    rule = {"id": draw(st.one_of(st.just("fuzz.rule"), TEXT)), "title": draw(TEMPLATE), "when": draw(EXPR),
            "evidence": draw(st.one_of(st.just(["steady.copy_share"]), st.lists(TOML_VALUE, max_size=2)))}
    for key in draw(st.lists(st.sampled_from(["score", "label", "severity", "fallback", "recommendation", "x"]),
                             unique=True, max_size=3)):
        rule[key] = draw(st.one_of(TOML_VALUE, st.sampled_from(["compute_bound", "high"]), st.lists(
            st.dictionaries(st.sampled_from(["text", "gain", "expected_gain", "when", "code"]), TOML_VALUE,
                            max_size=4), max_size=2)) if key != "recommendation" else st.lists(
            st.fixed_dictionaries({"text": TEMPLATE}, optional={"gain": EXPR, "expected_gain": TEMPLATE,
                                                                "when": EXPR}), max_size=2))
    body = "[[rule]]\n" + "".join(f"{json.dumps(k)} = {toml(v)}\n" for k, v in rule.items())
    return draw(st.one_of(st.just(body), st.just(body.replace("[[rule]]\n", "rule = [5]\n", 1)),
                          st.binary(max_size=60).map(lambda b: b.decode("latin-1"))))


@given(text=rule_file(), values=st.dictionaries(st.sampled_from(METRICS), st.one_of(st.none(), NUMBERS), max_size=4))
def test_rules_toml(text: str, values: dict) -> None:
    from diag.engine.evaluate import render
    from diag.engine.rules import parse_rule_file

    rules = result_or_one_line_error(lambda: parse_rule_file("fuzz.toml", text), seconds=5)
    for rule in rules or []:
        with_extras = {**values, "gain": 1.5, "score": 0.5}
        for expr in [rule.when, rule.score, *(r.gain for r in rule.recommendations)]:
            if expr is not None:
                out = expr(values)
                assert finite_or_none(out) and not isinstance(out, (complex, str))
        assert len(render(rule.title, with_extras)) < 10_000
        for r in rule.recommendations:
            assert len(render(r.text, with_extras) + render(r.expected_gain, with_extras)) < 20_000


# -- through the CLI: exit 0 or 2, one line --------------------------------------------------

@pytest.mark.parametrize("name", ["run.json", "raw", "kineto", "rules"])
def test_cli_exit_codes(tmp_path, capsys, name: str) -> None:
    d = str(tmp_path / "run")
    if name == "run.json":
        write_run(d, '{"schema": "diag.run/1", "command": "[/]", "start_ns": 1e400}')
        assert cli_rc(d, capsys) == 2
    elif name == "raw":
        write_run(d, json.dumps(base_manifest()), {"steps": [*good_steps(), "5", deep(100_000), '{"ts_ns": NaN}']})
        assert cli_rc(d, capsys) == 0
    elif name == "kineto":
        path = str(tmp_path / "t.json")
        with open(path, "w") as f:
            f.write('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1e400}]}')
        assert cli_rc(path, capsys) == 2
    else:
        write_run(d, json.dumps(base_manifest()))
        rules = tmp_path / "rules"
        rules.mkdir()
        (rules / "x.toml").write_text('[[rule]]\nid = "a"\ntitle = "{steady.copy_share:>2000000000}"\n'
                                      'when = "steady.copy_share > 0"\nevidence = ["steady.copy_share"]\n')
        assert cli_rc(d, capsys, "--rules", str(rules)) == 2
