"""Sensor windows arriving over a local TCP socket from a slow producer: the consumer waits in recv.

A producer process sends one 64 KiB window every 100 ms; the consumer reads
each with socket.recv_into and runs a 1-D CNN on it (a few ms).
"""

from __future__ import annotations

import socket
import subprocess
import sys

WINDOW = 64 * 1024

PRODUCER = f"""
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
data, t = bytes(range(256)) * ({WINDOW} // 256), time.monotonic()
try:
    while True:
        t += 0.1
        time.sleep(max(0.0, t - time.monotonic()))
        s.sendall(data)
except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
    pass
"""


def main() -> None:
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0])
    import torch
    from torch import nn

    model = nn.Sequential(nn.Conv1d(1, 16, 9, stride=4), nn.ReLU(), nn.Conv1d(16, 32, 9, stride=4), nn.ReLU(),
                          nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 3)).to(a.device).eval()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    prod = subprocess.Popen([sys.executable, "-c", PRODUCER, str(srv.getsockname()[1])], start_new_session=True)
    conn, _ = srv.accept()
    buf = bytearray(WINDOW)
    stop = Stop(a.seconds)
    n = 0
    try:
        with torch.inference_mode():
            while not stop:
                view, got = memoryview(buf), 0
                while got < WINDOW:
                    k = conn.recv_into(view[got:])
                    if not k:
                        raise SystemExit("producer ended")
                    got += k
                x = torch.frombuffer(buf, dtype=torch.uint8).float().view(1, 1, -1).to(a.device)
                model(x).softmax(-1).cpu()
                n += 1
    finally:
        prod.kill()
        prod.wait()
    report("socket_feed", n, "windows", stop.elapsed(), a.device)


if __name__ == "__main__":
    main()
