"""Issue 9, failure 5: no secret from the command line or the environment is
stored or shown, unless --no-redact asks for everything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from diag.collect.redact import MASK, redact_argv, redact_env, redact_pyspy_bytes, redact_text

SECRETS = ("hunter2", "tok_abc999", "s3cretPASS", "s3cretCREDS", "urlpass9", "bearer777")


@pytest.mark.parametrize("argv,expected", [
    (["app.py", "--password", "hunter2", "--port", "8000"], ["app.py", "--password", MASK, "--port", "8000"]),
    (["app.py", "--token=tok_abc999"], ["app.py", f"--token={MASK}"]),
    (["app.py", "--hf-token", "x", "--api_key=y", "--tokenizer", "bert", "--max-tokens", "64"],
     ["app.py", "--hf-token", MASK, f"--api_key={MASK}", "--tokenizer", "bert", "--max-tokens", "64"]),
    (["app.py", "db_password=abc", "batch=8"], ["app.py", f"db_password={MASK}", "batch=8"]),
    (["app.py", "--cache", "redis://user:urlpass9@host:6379/0"], ["app.py", "--cache", f"redis://{MASK}@host:6379/0"]),
    (["curl", "-H", "Authorization: Bearer bearer777", "http://h"], ["curl", "-H", f"Authorization: {MASK}", "http://h"]),
    (["curl", "--header=X-Api-Key: k"], ["curl", f"--header=X-Api-Key: {MASK}"]),
    (["app.py", "--url", "https://h/v1?model=m&api_key=k1&n=2"], ["app.py", "--url", f"https://h/v1?model=m&api_key={MASK}&n=2"]),
])
def test_redact_argv(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


def test_redact_env() -> None:
    env = {"TORCHINDUCTOR_REDIS_PASS": "a", "NCCL_CREDS": "b", "HF_TOKEN": "c", "AWS_SECRET_ACCESS_KEY": "d",
           "DB_PWD": "e", "X_AUTH": "f", "TORCHINDUCTOR_REDIS_URL": "redis://u:p@h", "OMP_NUM_THREADS": "4",
           "TOKENIZERS_PARALLELISM": "false"}
    out = redact_env(env)
    assert all(out[k] == MASK for k in ("TORCHINDUCTOR_REDIS_PASS", "NCCL_CREDS", "HF_TOKEN",
                                        "AWS_SECRET_ACCESS_KEY", "DB_PWD", "X_AUTH"))
    assert out["TORCHINDUCTOR_REDIS_URL"] == f"redis://{MASK}@h"
    assert out["OMP_NUM_THREADS"] == "4" and out["TOKENIZERS_PARALLELISM"] == "false"


def test_redact_text_and_pyspy_root_frames() -> None:
    assert "hunter2" not in redact_text("Collecting from 'python app.py --password hunter2'")
    raw = (b'[{"args":{"filename":"","line":0},"cat":"py-spy","name":"process 12:\\"python a.py --password '
           b'hunter2 --token=tok_abc999\\"","ph":"B","pid":12,"tid":1,"ts":5}]')
    out = redact_pyspy_bytes(raw)
    assert b"hunter2" not in out and b"tok_abc999" not in out and b'"name":"process 12:\\"python a.py' in out
    # cut anywhere, the streaming pass gives the same bytes
    for cut in range(1, len(raw), 7):
        assert redact_pyspy_bytes(raw, chunk=cut) == out


def _all_text(run_dir: Path) -> str:
    """Every file under the run, Parquet decoded, and every file name."""
    parts = []
    for root, dirs, files in os.walk(run_dir):
        parts += dirs + files
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".parquet"):
                parts.append(pq.read_table(path).to_pandas().to_csv())
            else:
                parts.append(Path(path).read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


TARGET = ("import time, sys\nt = time.time()\nwhile time.time() - t < 1.5:\n    sum(range(1000))\n"
          "print('args', len(sys.argv))\n")


def _profile(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "app.py"
    script.write_text(TARGET)
    env = {**os.environ, "TORCHINDUCTOR_REDIS_PASS": "s3cretPASS", "NCCL_CREDS": "s3cretCREDS",
           "TORCHINDUCTOR_CACHE_URL": "redis://user:urlpass9@host"}
    return subprocess.run(
        [sys.executable, "-m", "diag.cli", "profile", "--no-gpu", "--html", *extra, "--", sys.executable,
         str(script), "--password", "hunter2", "--token=tok_abc999", "redis://user:urlpass9@host",
         "-H", "Authorization: Bearer bearer777"],
        capture_output=True, timeout=180, cwd=tmp_path, env=env)


def test_no_secret_anywhere_in_the_run_console_or_report(tmp_path: Path) -> None:
    r = _profile(tmp_path)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    (run,) = list((tmp_path / "diag-runs").iterdir())
    text = _all_text(run) + run.name + r.stdout.decode() + r.stderr.decode()
    assert "report.html" in os.listdir(run)
    assert "stacks" in text  # py-spy ran, so its files were searched too
    for secret in SECRETS:
        assert secret not in text, secret


def test_no_redact_keeps_everything(tmp_path: Path) -> None:
    r = _profile(tmp_path, "--no-redact", "--no-stacks")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    (run,) = list((tmp_path / "diag-runs").iterdir())
    manifest = (run / "run.json").read_text()
    assert "hunter2" in manifest and "s3cretPASS" in manifest and "urlpass9" in manifest
    assert "hunter2" in _all_text(run / "raw")
