"""shard_embedder with its fix applied: DataLoader workers download the shards ahead of the model.

The same store, shards and model as sample_workloads/shard_embedder.py; the
downloads move into 4 DataLoader worker processes (each with its own
connection) that keep 4 shards each ready, so the stepping thread no longer
waits on the network.
"""

from __future__ import annotations

import http.client
import os
import sys
import tempfile
import threading
import warnings
from http.server import ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import Deadline, parse_args, summary, sync  # noqa: E402
from shard_embedder import FEATURES, ROWS, SHARDS, ShardStore, write_shards  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset, get_worker_info  # noqa: E402

WORKERS, PREFETCH = 4, 4
# the download workers wait on the network, not the CPU: more of them than cores is the point
warnings.filterwarnings("ignore", message="This DataLoader will create")


class Shards(IterableDataset):
    """Endless shards from the store; worker k of n fetches shards k, k+n, k+2n, ..."""

    def __init__(self, port: int) -> None:
        self.port = port

    def __iter__(self):  # noqa: ANN204 - a generator of tensors
        info = get_worker_info()
        k, n = (info.id, info.num_workers) if info else (0, 1)
        conn = http.client.HTTPConnection("127.0.0.1", self.port)
        i = k
        while True:
            conn.request("GET", f"/shard-{i % SHARDS:04d}.bin")
            data = conn.getresponse().read()
            yield torch.from_numpy(np.frombuffer(data, dtype=np.float32).reshape(ROWS, FEATURES).copy())
            i += n


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    model = nn.Sequential(nn.Linear(FEATURES, 128), nn.ReLU(), nn.Linear(128, 64)).to(args.device).eval()
    with tempfile.TemporaryDirectory() as root:
        write_shards(root)
        ShardStore.root = root
        store = ThreadingHTTPServer(("127.0.0.1", 0), ShardStore)
        threading.Thread(target=store.serve_forever, daemon=True).start()
        loader = DataLoader(Shards(store.server_address[1]), batch_size=None, num_workers=WORKERS,
                            prefetch_factor=PREFETCH, pin_memory=args.device == "cuda")
        shards = iter(loader)

        deadline = Deadline(args.seconds)
        steps, total_norm = 0, 0.0
        with torch.inference_mode():
            while not deadline.done():
                rows = next(shards)
                embeddings = model(rows.to(args.device, non_blocking=True))
                total_norm += float(embeddings.norm(dim=1).mean())
                steps += 1
        sync(args.device)
        elapsed = deadline.elapsed()
        del shards  # stops the workers
        store.shutdown()
    summary("shard_embedder_prefetch", args.device, steps * ROWS, "rows", elapsed,
            f"mean embedding norm {total_norm / max(steps, 1):.2f}")


if __name__ == "__main__":
    main()
