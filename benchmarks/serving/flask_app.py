"""Flask server, model called in the view (gunicorn sync or gthread workers).

Run: gunicorn -w 1 -b 127.0.0.1:8000 benchmarks.serving.flask_app:app
Environment: SERVE_VARIANT (base | tokenize | read | sleep: a blocking 20 ms call, e.g. a sync client), SERVE_ANNOTATE, SERVE_TIMES as fastapi_app.py.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import torch
from flask import Flask, jsonify, request

from benchmarks.serving.common import TimedWsgi, ensure_blob, read_blob
from benchmarks.serving.model import make_model, tokenize

VARIANT = os.environ.get("SERVE_VARIANT", "base")
ANNOTATE = os.environ.get("SERVE_ANNOTATE") == "1"

torch.set_num_threads(1)
model = make_model(os.environ.get("SERVE_MODEL", "small"))
app = Flask(__name__)
if VARIANT == "read":
    ensure_blob()


app.wsgi_app = TimedWsgi(app.wsgi_app)  # type: ignore[method-assign]


def _ctx(kind: str, name: str = "") -> Any:
    if not ANNOTATE:
        return contextlib.nullcontext()
    import diag
    return diag.request() if kind == "request" else diag.stage(name)


@app.post("/classify")
def classify() -> Any:
    with _ctx("request"):
        text = str((request.get_json(silent=True) or {}).get("text", "the quick brown fox"))
        with _ctx("stage", "tokenize"):
            ids = tokenize(text, heavy_ms=12.0 if VARIANT == "tokenize" else 0.0)
        if VARIANT == "read":
            with _ctx("stage", "read"):
                read_blob()
        if VARIANT == "sleep":
            with _ctx("stage", "lookup"):
                time.sleep(0.02)
        with _ctx("stage", "model"), torch.inference_mode():
            label = int(model(torch.tensor([ids])).argmax(dim=1)[0])
    return jsonify(label=label)
