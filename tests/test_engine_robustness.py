"""diagnose() never crashes on damaged data: nulls anywhere, empty tables, odd types."""

from __future__ import annotations

import json

import analysis_fixtures as F
import numpy as np
import pandas as pd
import pytest

from diag.engine import diagnose
from diag.store.run import TABLES, open_run
from diag.views.console import render_text
from diag.views.json_view import dumps


def _kitchen_sink(path: str):
    """A GPU run with every table filled: steps, requests, copies, syncs, gc, stacks, kernels."""
    b = F.RunBuilder(path, gpu=True)
    steps = F._loop(b, 0.010, 0.5, syncs=1)
    for i, (s, e) in enumerate(steps[:800]):
        b.copy(s - 0.001, 0.0008, 4_000_000)
        b.sync(e, 0.001)
        b.request(s - 0.003, e - s + 0.004, tid=F.TID + 5)
        if i % 50 == 0:
            b.event("gc", s + 0.001, 0.002, detail={"generation": 2})
    b.stacks([(e, 0.004, F.SOCKET_READ, True) for _, e in steps[:800]])
    b.event("ort_session", 1.0, 0.1, detail={"requested": ["CUDAExecutionProvider"], "got": ["CPUExecutionProvider"]})
    b.thread_cpu(0.6)
    b.host(150, read_bps=1e6, read_chars_bps=2e6, iowait=0.01)
    b.gpu_samples(40, from_s=F.STARTUP_S, gpm={"sm_active": 30, "sm_occupancy": 10, "tensor_active": 5,
                                                "dram_bw_util": 10, "fp32_active": 3, "fp16_active": 0})
    t0 = steps[300][0]
    b.kernel_window(0, t0, 2, [(t0 + j * 20e-6, 8e-6, "gemm" if j % 3 else "memcpy") for j in range(100)])
    return b.write()


@pytest.mark.parametrize("seed", range(4))
def test_random_nulls_do_not_crash(tmp_path, seed):
    run = _kitchen_sink(str(tmp_path / "base"))
    rng = np.random.default_rng(seed)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "run.json").write_text((tmp_path / "base" / "run.json").read_text())
    for name in TABLES:
        df = run.table(name).copy()
        if df.empty:
            continue
        for col in df.columns:
            if col in ("ts_ns",) and seed % 2 == 0:
                continue  # half the seeds keep timestamps, so later stages see data
            mask = rng.random(len(df)) < 0.3
            df[col] = df[col].astype(object).where(~mask, None)
        df.to_parquet(damaged / f"{name}.parquet", index=False)
    d = diagnose(open_run(str(damaged)))
    json.loads(dumps(d))
    render_text(d)


def test_empty_tables_everywhere(tmp_path):
    run = F.RunBuilder(str(tmp_path), gpu=True).write()
    for name in TABLES:
        pd.DataFrame({c: [] for c in TABLES[name]}).to_parquet(tmp_path / f"{name}.parquet", index=False)
    d = diagnose(open_run(run.path))
    assert d.primary is None


def test_manifest_without_optional_sections(tmp_path):
    run = F.cpu_compute(str(tmp_path))
    m = json.loads((tmp_path / "run.json").read_text())
    for key in ("host", "gpu", "collectors", "options", "versions", "env", "end_ns"):
        m.pop(key, None)
    (tmp_path / "run.json").write_text(json.dumps(m))
    d = diagnose(open_run(run.path))
    assert d.primary == "compute_bound"
    assert d.metrics["steady.cpu_cores"] is None
