"""A WSGI app with a known service time for `diag profile --load` tests: every request sleeps 50 ms.

Under `gunicorn -w N --threads 1` (sync workers) at most N requests are served at once, and the
others wait in the listen backlog before any worker accepts them: a wait before the handler that
only the client sees.
"""

from __future__ import annotations

import time

SERVICE_S = 0.050


def app(environ, start_response):  # noqa: ANN001, ANN201 - WSGI
    time.sleep(SERVICE_S)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
