"""Flask server, model called in the view (gunicorn sync or gthread workers).

Run: gunicorn -w 1 -b 127.0.0.1:8000 benchmarks.serving.flask_app:app
Environment: SERVE_VARIANT (base | tokenize | read), SERVE_ANNOTATE, SERVE_TIMES as fastapi_app.py.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import time
from typing import Any

import torch
from flask import Flask, jsonify, request

from benchmarks.serving.fastapi_app import read_blob  # the same uncached read
from benchmarks.serving.model import make_model, tokenize

VARIANT = os.environ.get("SERVE_VARIANT", "base")
ANNOTATE = os.environ.get("SERVE_ANNOTATE") == "1"
TIMES_DIR = os.environ.get("SERVE_TIMES", "")

torch.set_num_threads(1)
model = make_model(os.environ.get("SERVE_MODEL", "small"))
app = Flask(__name__)
_handler_ms: list[float] = []


def _write_times() -> None:
    if TIMES_DIR:
        with open(os.path.join(TIMES_DIR, f"times.{os.getpid()}.json"), "w") as f:
            json.dump({"pid": os.getpid(), "handler_ms": _handler_ms}, f)


atexit.register(_write_times)


def _ctx(kind: str, name: str = "") -> Any:
    if not ANNOTATE:
        return contextlib.nullcontext()
    import diag
    return diag.request() if kind == "request" else diag.stage(name)


@app.post("/classify")
def classify() -> Any:
    t0 = time.perf_counter()
    with _ctx("request"):
        text = str((request.get_json(silent=True) or {}).get("text", "the quick brown fox"))
        with _ctx("stage", "tokenize"):
            ids = tokenize(text, heavy_ms=12.0 if VARIANT == "tokenize" else 0.0)
        if VARIANT == "read":
            with _ctx("stage", "read"):
                read_blob()
        with _ctx("stage", "model"), torch.inference_mode():
            label = int(model(torch.tensor([ids])).argmax(dim=1)[0])
    _handler_ms.append((time.perf_counter() - t0) * 1e3)
    return jsonify(label=label)
