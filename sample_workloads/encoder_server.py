"""A text classification server: a transformer encoder behind http.server.

Handler threads take POSTed text, hand it to one model worker (batch size 1,
first come first served) and reply with the label. A client thread in the
same process sends requests at random (Poisson) times, at 95% of the rate the
worker sustains (measured as it runs, so the load fits any machine). Each request is an NVTX range named "request", from its
arrival to its reply.
"""

from __future__ import annotations

import collections
import http.client
import queue
import random
import statistics
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import nvtx
import torch
from _common import Deadline, parse_args, summary
from torch import nn

# (d_model, layers, sequence length) per device.
SHAPES = {"cpu": (256, 4, 128), "cuda": (768, 12, 512)}
VOCAB = 30_000
LOAD = 0.95  # arrival rate as a share of the worker's measured capacity
UNAVAILABLE = -1  # the reply for requests still waiting at shutdown
WORDS = "the a model server request reply fast cheap good bad order ship late early price item".split()


class TextClassifier(nn.Module):
    def __init__(self, d_model: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        layer = nn.TransformerEncoderLayer(d_model, d_model // 64, 4 * d_model, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def tokenize(text: str, length: int) -> list[int]:
    ids = [zlib.crc32(word.encode()) % VOCAB for word in text.lower().split()][:length]
    return ids + [0] * (length - len(ids))


class Worker:
    """Serves pending texts one at a time, in arrival order."""

    def __init__(self, model: nn.Module, device: str, length: int) -> None:
        self.model, self.device, self.length = model, device, length
        self.pending: queue.Queue = queue.Queue()
        self.accepting = True  # False: answer what is left with "unavailable" (shutting down)
        self.closed = False
        self.recent: collections.deque[float] = collections.deque(maxlen=20)  # seconds per request

    def classify(self, text: str) -> int:
        tokens = torch.tensor([tokenize(text, self.length)], device=self.device)
        return int(self.model(tokens).argmax(dim=1).cpu()[0])

    def timed_classify(self, text: str) -> int:
        start = time.perf_counter()
        label = self.classify(text)
        self.recent.append(time.perf_counter() - start)
        return label

    def service_s(self) -> float:
        """Typical time to serve one request (median: a few outliers should not move it)."""
        return statistics.median(self.recent)

    def run(self) -> None:
        with torch.inference_mode():
            while not self.closed:
                try:
                    text, reply, done = self.pending.get(timeout=0.1)
                except queue.Empty:
                    continue
                reply.append(self.timed_classify(text) if self.accepting else UNAVAILABLE)
                done.set()


def make_handler(worker: Worker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            with nvtx.annotate("request"):
                text = self.rfile.read(int(self.headers["Content-Length"])).decode()
                reply: list[int] = []
                done = threading.Event()
                worker.pending.put((text, reply, done))
                done.wait()
                body = str(reply[0]).encode()
                self.send_response(503 if reply[0] == UNAVAILABLE else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def send(port: int, text: str, latencies: list[float]) -> None:
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("POST", "/classify", body=text.encode())
    response = conn.getresponse()
    response.read()
    conn.close()
    if response.status == 200:
        latencies.append(time.perf_counter() - start)


def client(port: int, worker: Worker, stop: threading.Event, latencies: list[float]) -> None:
    """Open-loop load: requests leave at Poisson times whether or not earlier ones came back."""
    rnd = random.Random(0)
    while not stop.wait(rnd.expovariate(LOAD / worker.service_s())):
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(20, 120)))
        threading.Thread(target=send, args=(port, text, latencies), daemon=True).start()


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    d_model, layers, length = SHAPES[args.device]
    model = TextClassifier(d_model, layers).to(args.device).eval()
    worker = Worker(model, args.device, length)
    with torch.inference_mode():  # warm up, then time a few calls for the first service time estimate
        for _ in range(10):
            worker.classify(" ".join(WORDS))
        for _ in range(10):
            worker.timed_classify(" ".join(WORDS))

    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(worker))
    server.daemon_threads = False  # so server_close() waits for every open request to be answered
    threading.Thread(target=server.serve_forever, daemon=True).start()
    worker_thread = threading.Thread(target=worker.run, name="model-worker")
    worker_thread.start()

    deadline = Deadline(args.seconds)
    latencies: list[float] = []
    load = threading.Thread(target=client, args=(server.server_address[1], worker, deadline.stop, latencies))
    load.start()
    deadline.wait()
    deadline.stop.set()
    elapsed = deadline.elapsed()
    load.join()
    worker.accepting = False  # answer the requests still waiting with 503, so none is left open
    server.shutdown()
    server.server_close()
    worker.closed = True
    worker_thread.join()
    done = sorted(latencies)
    p50 = done[len(done) // 2] * 1000 if done else 0.0
    summary("encoder_server", args.device, len(done), "requests", elapsed, f"p50 latency {p50:.1f} ms")


if __name__ == "__main__":
    main()
