"""diag load without a server: SLO parsing, arrivals, the sweep's choices, settings and redaction."""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import sys

import pytest

from diag.cli import main
from diag.errors import DiagError
from diag.load import parse_load_args
from diag.load.client import LOOP_ENV, classify, run_loop
from diag.load.schedule import arrival_offsets
from diag.load.slo import parse_slo
from diag.load.spec import render_body
from diag.load.stats import summarise
from diag.load.sweep import bisect_level, bounds, climb_levels, knee


def test_slo_parsing() -> None:
    s = parse_slo("p99<200ms")
    assert (s.key, s.op, s.limit) == ("p99_ms", "<", 200.0)
    assert parse_slo("p50 <= 0.25s").limit == 250.0
    assert parse_slo("errors<1%").limit == pytest.approx(0.01)
    assert parse_slo("errors<0.02").key == "error_rate"
    assert parse_slo("p99<200ms").check({"p99_ms": 150.0})["held"] is True
    assert parse_slo("p99<200ms").check({"p99_ms": 250.0})["held"] is False
    assert parse_slo("p99<200ms").check({"p99_ms": None})["held"] is False  # nothing answered: not held


@pytest.mark.parametrize("text", ["p99<200", "p98<200ms", "errors<5ms", "p99>200ms", "", "latency<1s", "errors<150%"])
def test_bad_slo_is_one_line_exit_2(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(DiagError):
        parse_slo(text)
    assert main(["load", "http://127.0.0.1:9/", "--slo", text]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("diag: ") and "Traceback" not in err


@pytest.mark.parametrize("argv", [["ftp://x/"], ["http://x/", "--rate", "0"], ["http://x/", "--rate", "nan"],
                                  ["http://x/", "--header", "NoColon"], ["http://x/", "--sweep"],
                                  ["http://x/", "--rate", "5", "--concurrency", "2"],
                                  ["http://x/", "--payloads", "/nonexistent.jsonl"]])
def test_bad_settings_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_poisson_and_constant_arrivals() -> None:
    offs = list(arrival_offsets(200.0, 20.0, "poisson", seed=1))
    assert len(offs) == pytest.approx(4000, rel=0.05)
    gaps = [b - a for a, b in zip(offs, offs[1:], strict=False)]
    assert statistics.mean(gaps) == pytest.approx(1 / 200, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(1 / 200, rel=0.1)  # exponential: sd == mean
    assert list(arrival_offsets(4.0, 1.0, "constant")) == [0.0, 0.25, 0.5, 0.75]


def test_sweep_levels_bisection_and_knee() -> None:
    assert climb_levels(10, 1.5, 4, whole=False) == [10, 15, 22.5, 33.75]
    assert climb_levels(1, 1.2, 4, whole=True) == [1, 2, 3, 4]  # concurrency: whole and rising
    steps = [{"level": lv, "held": ok} for lv, ok in ((10, True), (20, True), (40, False), (30, True), (80, False))]
    assert bounds(steps) == (30, 40)
    assert bisect_level(30, 40, whole=False) == pytest.approx(34.64, rel=1e-3)
    assert bisect_level(3, 4, whole=True) is None
    flat_then_up = [{"level": lv, "p99_ms": ms} for lv, ms in ((10, 50), (20, 51), (40, 53), (60, 55), (80, 400))]
    assert knee(flat_then_up) == 60
    assert knee(flat_then_up[:2]) is None


def test_error_kinds() -> None:
    assert classify(200, None) is None
    assert [classify(s, None) for s in (302, 404, 503)] == ["redirect", "http_4xx", "http_5xx"]
    assert classify(0, TimeoutError()) == "timeout"
    assert classify(0, ConnectionResetError()) == "disconnected"


def test_stats_latency_from_due_time_and_errors_by_kind() -> None:
    rows = [{"ts_ns": 0, "sent_ns": 2_000_000, "end_ns": 0, "latency_ms": float(ms), "status": 200, "error": None,
             "bytes": 2, "phase": "measure", "step": 0} for ms in range(1, 101)]
    rows += [{**rows[0], "error": "http_5xx", "status": 500}, {**rows[0], "phase": "warmup", "latency_ms": 1e6}]
    st = summarise(rows, seconds=10.0)
    assert st["requests"] == 101 and st["ok"] == 100 and st["errors_by_kind"]["http_5xx"] == 1
    assert st["p50_ms"] == pytest.approx(50.5) and st["max_ms"] == 100.0  # warm-up left out
    assert st["send_lag_p99_ms"] == pytest.approx(2.0)
    assert st["throughput_per_s"] == pytest.approx(10.0)


def test_bodies_and_secret_headers(tmp_path) -> None:  # noqa: ANN001
    pay = tmp_path / "p.jsonl"
    pay.write_text('{"text": "a"}\n\n{"text": "b"}\n')
    spec = parse_load_args(f"http://u:pw@127.0.0.1/x?api_key=K --payloads {pay} "
                           "--header 'Authorization: Bearer sekrit' --header 'X-Trace: 1'")
    assert spec.method == "POST" and [render_body(spec.bodies, i) for i in range(3)] == \
        [b'{"text":"a"}', b'{"text":"b"}', b'{"text":"a"}']
    shown = repr(spec.public())
    assert "sekrit" not in shown and ":pw@" not in shown and "=K" not in shown and "'X-Trace': '1'" in shown
    assert render_body(parse_load_args(["http://x/", "--body", "n={i}"]).bodies, 7) == b"n=7"


def test_event_loop_is_uvloop_where_installed_else_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    has_uvloop = importlib.util.find_spec("uvloop") is not None and sys.version_info >= (3, 11)
    seen: list[str] = []

    async def which() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    monkeypatch.setenv(LOOP_ENV, "asyncio")
    run_loop(which())
    monkeypatch.delenv(LOOP_ENV)
    run_loop(which())
    monkeypatch.setitem(sys.modules, "uvloop", None)  # the import fails, as on Windows
    run_loop(which())
    assert seen[0].startswith("asyncio") and seen[2].startswith("asyncio")
    assert seen[1].startswith("uvloop" if has_uvloop else "asyncio")


def test_the_heap_that_exists_before_the_load_is_not_scanned_during_it(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A full collection of a host's heap stopped the sender for ~390 ms inside the test runner (late sends)."""
    import gc

    from diag.load import runner

    seen: list[int] = []

    def fake_loop(coro) -> None:  # noqa: ANN001
        coro.close()
        seen.append(gc.get_freeze_count())

    monkeypatch.setattr(runner, "run_loop", fake_loop)
    runner.run_load(parse_load_args(["http://127.0.0.1:9/", "--rate", "5", "--duration", "0.1"]),
                    out=str(tmp_path / "run"))
    assert seen and seen[0] > 0 and gc.get_freeze_count() == 0  # frozen while the load ran, thawed after
