"""Tabular scoring with an ONNX Runtime MLP, fed from CSV text rows.

The ONNX model is built in-process with onnx.helper (nothing downloaded). Each
step parses a batch of CSV lines in Python (numbers, timestamps, hashed
categories), then runs the session. `--device cuda` asks ONNX Runtime for the
CUDA provider first, as most serving code does.
"""

from __future__ import annotations

import os
import random
import zlib
from datetime import datetime

import numpy as np
import onnx
import onnxruntime as ort
from _common import Deadline, parse_args, summary
from onnx import TensorProto, helper, numpy_helper

BATCH = 1024
NUMERIC = 8  # numeric columns in each row
BUCKETS = 48  # hashed one-hot slots for the categorical columns
FEATURES = NUMERIC + 4 + BUCKETS  # numbers, 4 time features, hashed categories
CITIES = ["paris", "lyon", "oslo", "lima", "pune", "kyiv", "austin", "osaka"]
BROWSERS = ["firefox", "chrome", "safari", "edge"]


def build_mlp(path: str, widths: list[int]) -> None:
    """Write an MLP (MatMul + Add + Relu layers, sigmoid output) as an ONNX file."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "features"
    for i, (cin, cout) in enumerate(zip(widths[:-1], widths[1:], strict=True)):
        w = numpy_helper.from_array(
            (rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32), f"w{i}"
        )
        b = numpy_helper.from_array(np.zeros(cout, np.float32), f"b{i}")
        inits += [w, b]
        nodes += [
            helper.make_node("MatMul", [prev, f"w{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"z{i}"]),
        ]
        last = i == len(widths) - 2
        nodes.append(
            helper.make_node("Sigmoid" if last else "Relu", [f"z{i}"], ["score" if last else f"h{i}"])
        )
        prev = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "tabular_mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, widths[0]])],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, [None, widths[-1]])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9  # readable by every onnxruntime since 1.15
    onnx.save(model, path)


def make_rows(n: int) -> list[str]:
    rnd = random.Random(0)
    return [
        ",".join(
            [f"{rnd.uniform(0, 1000):.3f}" for _ in range(NUMERIC)]
            + [
                f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}:00",
                rnd.choice(CITIES),
                rnd.choice(BROWSERS),
                f"user{rnd.randint(0, 99999)}",
            ]
        )
        for _ in range(n)
    ]


def featurize(line: str) -> list[float]:
    """One CSV row to a feature vector: scaled numbers, time of day/week, hashed categories."""
    cols = line.split(",")
    values = [float(c) / 1000.0 for c in cols[:NUMERIC]]
    when = datetime.strptime(cols[NUMERIC], "%Y-%m-%dT%H:%M:%S")
    values += [when.hour / 23, when.weekday() / 6, when.month / 12, when.day / 31]
    onehot = [0.0] * BUCKETS
    for col in cols[NUMERIC + 1 :]:
        onehot[zlib.crc32(col.encode()) % BUCKETS] = 1.0
    return values + onehot


def main() -> None:
    args = parse_args(
        __doc__.splitlines()[0], cuda_available=lambda: os.path.exists("/dev/nvidiactl"), cuda_required=False
    )
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tabular_mlp_{os.getpid()}.onnx")
    build_mlp(path, [FEATURES, 256, 256, 1])
    providers = (
        ["CUDAExecutionProvider", "CPUExecutionProvider"]
        if args.device == "cuda"
        else ["CPUExecutionProvider"]
    )
    session = ort.InferenceSession(path, providers=providers)
    os.remove(path)
    rows = make_rows(4 * BATCH)

    deadline = Deadline(args.seconds)
    steps = 0
    while not deadline.done():
        start = (steps * BATCH) % len(rows)
        features = np.array([featurize(line) for line in rows[start : start + BATCH]], dtype=np.float32)
        (scores,) = session.run(["score"], {"features": features})
        steps += 1
    summary(
        "ort_tabular",
        args.device,
        steps * BATCH,
        "rows",
        deadline.elapsed(),
        f"mean score {float(scores.mean()):.3f}",
    )


if __name__ == "__main__":
    main()
