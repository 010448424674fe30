"""Running a real server under `diag profile` on loopback, driven by a plain client (serving tests)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

from diag.store.run import Run, open_run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, data: bytes | None = None, timeout: float = 10) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers) of one request."""
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            get(url, timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


class Served:
    """`diag profile -- CMD` in the background in `cwd`, stopped with SIGINT (forwarded to the server)."""

    def __init__(self, tmp_path: Path, app_code: str, cmd: list[str]) -> None:
        (tmp_path / "app.py").write_text(textwrap.dedent(app_code))
        self.out = tmp_path / "run"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "diag", "profile", "--out", str(self.out), "--quiet", "--no-stacks", "--no-gpu",
             "--", *cmd], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> Run:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return open_run(str(self.out))


def details(events: Any, kind: str) -> list[dict[str, Any]]:
    rows = events[events["kind"] == kind]
    return [{"name": n, "pid": int(p), "tid": int(t), **json.loads(d)}
            for n, p, t, d in zip(rows["name"], rows["pid"], rows["tid"], rows["detail"], strict=True)]
