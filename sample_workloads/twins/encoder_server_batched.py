"""encoder_server with its fix applied: a micro-batcher serves every waiting request in one model call.

The same model, server, client and offered load as sample_workloads/encoder_server.py
(the arrival rate stays at 95% of the one-at-a-time capacity measured at start);
the worker takes whatever requests wait (up to MAX_BATCH) and classifies them as one
batch, so a request no longer queues behind each earlier one.
"""

from __future__ import annotations

import os
import queue
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import encoder_server as base  # noqa: E402
import torch  # noqa: E402
from _common import Deadline, parse_args, summary  # noqa: E402

MAX_BATCH = 32


class BatchingWorker(base.Worker):
    """Serves the waiting requests together; the offered load stays the one-at-a-time capacity's."""

    def freeze_rate(self) -> None:
        self.frozen_s = base.statistics.median(self.recent)

    def service_s(self) -> float:
        return self.frozen_s

    def classify_many(self, texts: list[str]) -> list[int]:
        tokens = torch.tensor([base.tokenize(t, self.length) for t in texts], device=self.device)
        return [int(v) for v in self.model(tokens).argmax(dim=1).cpu()]

    def run(self) -> None:
        with torch.inference_mode():
            while not self.closed:
                try:
                    batch = [self.pending.get(timeout=0.1)]
                except queue.Empty:
                    continue
                while len(batch) < MAX_BATCH:
                    try:
                        batch.append(self.pending.get_nowait())
                    except queue.Empty:
                        break
                labels = self.classify_many([t for t, _, _ in batch]) if self.accepting \
                    else [base.UNAVAILABLE] * len(batch)
                for (_, reply, done), label in zip(batch, labels, strict=True):
                    reply.append(label)
                    done.set()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    d_model, layers, length = base.SHAPES[args.device]
    model = base.TextClassifier(d_model, layers).to(args.device).eval()
    worker = BatchingWorker(model, args.device, length)
    with torch.inference_mode():
        for _ in range(10):
            worker.classify(" ".join(base.WORDS))
        for _ in range(10):
            worker.timed_classify(" ".join(base.WORDS))
    worker.freeze_rate()

    server = base.ThreadingHTTPServer(("127.0.0.1", 0), base.make_handler(worker))
    server.daemon_threads = False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    worker_thread = threading.Thread(target=worker.run, name="model-worker")
    worker_thread.start()

    deadline = Deadline(args.seconds)
    latencies: list[float] = []
    load = threading.Thread(target=base.client, args=(server.server_address[1], worker, deadline.stop, latencies))
    load.start()
    deadline.wait()
    deadline.stop.set()
    elapsed = deadline.elapsed()
    load.join()
    worker.accepting = False
    server.shutdown()
    server.server_close()
    worker.closed = True
    worker_thread.join()
    done = sorted(latencies)
    p50 = done[len(done) // 2] * 1000 if done else 0.0
    summary("encoder_server_batched", args.device, len(done), "requests", elapsed, f"p50 latency {p50:.1f} ms")


if __name__ == "__main__":
    main()
