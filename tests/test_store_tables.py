"""`seal` writes every table a run holds, not a hand-typed list."""

from __future__ import annotations

import pandas as pd

from diag.store import run as store_run
from diag.store.jsonl import JsonlWriter
from diag.store.manifest import SCHEMA, write_manifest


def _empty_run(tmp_path) -> str:  # noqa: ANN001
    path = str(tmp_path / "run")
    (tmp_path / "run").mkdir()
    write_manifest(path, {"schema": SCHEMA, "start_ns": 1, "end_ns": 2})
    return path


def test_a_newly_registered_table_is_written(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(store_run, "_DERIVED", dict(store_run._DERIVED))
    store_run._load_parsers()
    store_run.derived_table("brand_new")(lambda run_dir: [{"ts_ns": 5, "value": 1.5}])
    path = _empty_run(tmp_path)
    store_run.seal(path)
    df = pd.read_parquet(f"{path}/brand_new.parquet")
    assert df.to_dict("records") == [{"ts_ns": 5, "value": 1.5}]


def test_a_raw_table_of_a_new_collector_is_written(tmp_path) -> None:
    path = _empty_run(tmp_path)
    w = JsonlWriter(path, "new_sampler")
    w.write({"ts_ns": 7, "x": 2})
    w.close()
    meta = JsonlWriter(path, "meta")
    meta.write({"ts_ns": 1, "pid": 1, "python": "3.11"})
    meta.close()
    assert "new_sampler" in store_run.stored_tables(path)
    store_run.seal(path)
    assert pd.read_parquet(f"{path}/new_sampler.parquet")["x"].tolist() == [2]
    for name in store_run.TABLES:  # the documented tables, even when empty
        assert (tmp_path / "run" / f"{name}.parquet").exists()
    assert not (tmp_path / "run" / "meta.parquet").exists()  # raw-only on purpose
