"""Where a report goes, and writing it there safely.

Rules (docs/report.md):
- `-o FILE` names the file: it is written, and replaced if it exists.
- No `-o`: the report goes to `RUN/report.html`; if that exists, to the first
  free `RUN/report-1.html`, `RUN/report-2.html`, ... so an earlier report is
  never overwritten by accident.
- A path that cannot be written is a DiagError (one line), never a traceback.
"""

from __future__ import annotations

import os
import secrets

from diag.errors import DiagError

DEFAULT_NAME = "report.html"


def report_path(run_path: str, out: str | None = None) -> str:
    """The file a report for the run at `run_path` goes to; DiagError if unwritable."""
    if out:
        return _checked_explicit(out)
    return _free_default(run_path)


def _checked_explicit(out: str) -> str:
    path = os.path.abspath(os.path.expanduser(out))
    if os.path.isdir(path):
        raise DiagError(f"{out}: is a directory; name the report file, e.g. {os.path.join(out, DEFAULT_NAME)}")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise DiagError(f"{out}: cannot write the report: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DiagError(f"{out}: cannot write the report: folder {parent} is not writable")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise DiagError(f"{out}: cannot write the report: the file is read-only")
    return path


def _free_default(run_path: str) -> str:
    folder = os.path.abspath(run_path)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise DiagError(f"{run_path}: cannot write a report into the run directory; pass -o FILE")
    stem, ext = os.path.splitext(DEFAULT_NAME)
    candidate = os.path.join(folder, DEFAULT_NAME)
    n = 1
    while os.path.exists(candidate):
        candidate = os.path.join(folder, f"{stem}-{n}{ext}")
        n += 1
    return candidate


def write_text_atomic(path: str, text: str, what: str = "report") -> None:
    """Write through a temporary file in the same folder, so a failure leaves no half file.

    The temporary file is new (O_EXCL), never a link (O_NOFOLLOW), and gets mode
    0666 less the umask, like any file a program creates: under `umask 077` the
    report is private.
    """
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise DiagError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise DiagError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None
