"""Embedding job that streams its input shards from an object store over HTTP.

A local stand-in for a remote store (S3, GCS, NFS) runs in a background thread:
it serves shard files written to a temp directory at start, with a network-like
time to first byte and bandwidth. Each step downloads one shard (128 feature
rows), embeds it with a small MLP and keeps the embedding norms.
"""

from __future__ import annotations

import http.client
import os
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import torch
from _common import Deadline, parse_args, summary, sync
from torch import nn

ROWS, FEATURES, SHARDS = 128, 1024, 64  # 512 KiB of float32 per shard
FIRST_BYTE_S = 0.050  # store latency before a response starts
BYTES_PER_S = 25e6  # store bandwidth per connection
CHUNK = 64 * 1024


class ShardStore(BaseHTTPRequestHandler):
    root = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        with open(os.path.join(self.root, self.path.lstrip("/")), "rb") as f:
            data = f.read()
        time.sleep(FIRST_BYTE_S)
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        for start in range(0, len(data), CHUNK):
            self.wfile.write(data[start : start + CHUNK])
            time.sleep(CHUNK / BYTES_PER_S)

    def log_message(self, *args: object) -> None:
        pass


def write_shards(root: str) -> None:
    rng = np.random.default_rng(0)
    for i in range(SHARDS):
        rng.standard_normal((ROWS, FEATURES), dtype=np.float32).tofile(
            os.path.join(root, f"shard-{i:04d}.bin")
        )


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 64)).to(args.device).eval()
    with tempfile.TemporaryDirectory() as root:
        write_shards(root)
        ShardStore.root = root
        store = ThreadingHTTPServer(("127.0.0.1", 0), ShardStore)
        threading.Thread(target=store.serve_forever, daemon=True).start()
        conn = http.client.HTTPConnection("127.0.0.1", store.server_address[1])

        deadline = Deadline(args.seconds)
        steps, total_norm = 0, 0.0
        with torch.inference_mode():
            while not deadline.done():
                conn.request("GET", f"/shard-{steps % SHARDS:04d}.bin")
                rows = np.frombuffer(conn.getresponse().read(), dtype=np.float32).reshape(ROWS, FEATURES)
                embeddings = model(torch.from_numpy(rows.copy()).to(args.device))
                total_norm += float(embeddings.norm(dim=1).mean())
                steps += 1
        sync(args.device)
        elapsed = deadline.elapsed()
        conn.close()
        store.shutdown()
    summary(
        "shard_embedder",
        args.device,
        steps * ROWS,
        "rows",
        elapsed,
        f"mean embedding norm {total_norm / max(steps, 1):.2f}",
    )


if __name__ == "__main__":
    main()
