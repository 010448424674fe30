"""`diag profile --load 'URL ...' -- CMD`: the load's side, run beside the server diag records.

A `ProfiledLoad` is the recorder's companion (diag.collect.profile.Companion): once
the server runs it polls URL until it answers (any HTTP status; `--load-wait`
seconds at most), drives the load with `run_load` in a thread, and says `done()`
so the recorder stops the server (SIGINT, then the usual escalation). The load
writes its own small run directory inside the server's (RUN/load); when the
server has ended, its `load_requests`/`load_sweep` rows move into the server's
raw/ (sealed with the server's tables) and its result goes to run.json["load"]:
one run holds both sides.
"""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from diag.collect.redact import redact_value
from diag.load.client import Progress
from diag.load.runner import LoadResult, run_load
from diag.load.spec import LoadSpec
from diag.store.jsonl import RAW_DIR

LOAD_SUBDIR = "load"
MOVED_TABLES = ("load_requests", "load_sweep")
POLL_S = 0.1
SWITCH_INTERVAL_S = 0.001


def answers(url: str, timeout: float = 1.0) -> bool:
    """True when an HTTP server answers at `url` (any status: a 405 to this GET is an answer)."""
    parts = urlsplit(url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/", headers={"User-Agent": "diag-load-wait"})
        conn.getresponse().read()
        return True
    except ssl.SSLError:
        return True  # something speaks TLS there: the load reports what goes wrong with it
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


class ProfiledLoad:
    """The load `diag profile --load` drives at the server it records."""

    def __init__(self, spec: LoadSpec, wait_s: float, say: Any = None) -> None:
        self.spec = spec
        self.wait_s = wait_s
        self.say = say or (lambda text: None)  # one line for the user (stderr), or nothing
        self.result: LoadResult | None = None
        self.error = ""  # one line: why no load ran, or why it failed
        self.ready_after_s: float | None = None
        self._progress: Progress | None = None
        self._gone = threading.Event()  # the server has ended
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._run_dir = ""

    # -- Companion -------------------------------------------------------------------------------
    def public(self) -> dict[str, Any]:
        return {**self.spec.public(), "wait_s": self.wait_s}

    def start(self, run_dir: str, pid: int) -> None:
        self._run_dir = run_dir
        self._thread = threading.Thread(target=self._main, name="diag-load", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        return self._done.is_set()

    def finish(self, manifest: dict[str, Any]) -> None:
        """The server has ended: stop the load if it still runs, move its rows in, note the result."""
        self._gone.set()
        if self._progress is not None and not self._progress.stopped:
            self._progress.stopped = "the server exited"
        if self._thread is not None:
            self._thread.join(self.spec.timeout + 10)
        try:
            self._move_rows()
        except OSError as exc:
            self.error = self.error or f"load rows not moved into the run ({exc.strerror or exc})"
        url = redact_value(self.spec.url)
        status: dict[str, Any] = {"status": "ok", "url": url, "ready_after_s": self.ready_after_s}
        if self.result is not None:
            res = dict(self.result.result, run_dir=self._run_dir)
            manifest["load"] = res
            if res.get("problem"):
                status.update(status="degraded", reason=res["problem"])
        else:
            status.update(status="failed", reason=self.error or "no load ran")
        if self.error and status["status"] == "ok":
            status.update(status="degraded", reason=self.error)
        manifest.setdefault("collectors", {})["load"] = status

    @property
    def exit_code(self) -> int:
        """0: the load ran and every SLO held; 1: it never ran, nothing answered or an SLO broke."""
        if self.result is None:
            return 1
        return 1 if self.result.result.get("exit_code") else 0

    # -- the load thread ---------------------------------------------------------------------------
    def _main(self) -> None:
        try:
            if not self._wait_ready():
                return
            self.say(f"load: {redact_value(self.spec.url)} answered after {self.ready_after_s:.1f} s; "
                     f"driving {self._how()}")
            # The load's event loop shares this process's GIL with the recorder's threads: a thread
            # that wants it waits up to the switch interval (5 ms by default), which a reply read
            # late adds to the client's latency. 1 ms bounds that (benchmarks/load_agreement.py).
            interval = sys.getswitchinterval()
            sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
            try:
                self.result = run_load(self.spec, os.path.join(self._run_dir, LOAD_SUBDIR), on_tick=self._tick)
            finally:
                sys.setswitchinterval(interval)
        except Exception as exc:  # noqa: BLE001 - diag's trouble never hurts the target: one line
            self.error = f"load failed ({exc.__class__.__name__}: {exc})"
        finally:
            self._done.set()

    def _how(self) -> str:
        s = self.spec
        level = f"{s.concurrency} in flight" if s.concurrency else f"{s.rate:g}/s"
        return (f"a sweep from {level}" if s.sweep else f"{level} for {s.warmup:g}+{s.duration:g} s")

    def _tick(self, p: Progress) -> None:
        self._progress = p
        if self._gone.is_set() and not p.stopped:
            p.stopped = "the server exited"

    def _wait_ready(self) -> bool:
        t0 = time.monotonic()
        url = redact_value(self.spec.url)
        while not self._gone.is_set():
            if answers(self.spec.url):
                self.ready_after_s = time.monotonic() - t0
                return True
            if time.monotonic() - t0 >= self.wait_s:
                self.error = (f"load: {url} did not answer within {self.wait_s:g} s (--load-wait); "
                              "the server was stopped, no load ran")
                return False
            self._gone.wait(POLL_S)
        self.error = f"load: the server exited before {url} answered; no load ran"
        return False

    def _move_rows(self) -> None:
        """The load's raw rows into the server's raw/ (sealed with its tables); the load's own run goes."""
        sub = os.path.join(self._run_dir, LOAD_SUBDIR)
        raw = os.path.join(sub, RAW_DIR)
        if not os.path.isdir(raw) or os.path.islink(sub):
            return
        dest = os.path.join(self._run_dir, RAW_DIR)
        os.makedirs(dest, exist_ok=True)
        for name in sorted(os.listdir(raw)):
            if name.split(".", 1)[0] in MOVED_TABLES and name.endswith(".jsonl"):
                os.replace(os.path.join(raw, name), os.path.join(dest, name))
        shutil.rmtree(sub, ignore_errors=True)
