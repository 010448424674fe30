"""Offline scoring of image crops with a small conv net in ONNX Runtime, big batches.

The ONNX graph (3x3 and 1x1 convolutions, global pooling, a linear head) is
built with onnx.helper and random weights, serialized in memory and loaded
into an InferenceSession. Input batches are prepared once and rotated, so
session.run is nearly all the work. `--device cuda` asks for the CUDA
provider first (a CPU-only onnxruntime falls back to the CPU).
"""

from __future__ import annotations

import numpy as np
import onnx
from _cli import StopFlag, options, report
from onnx import TensorProto, helper, numpy_helper

BATCH = {"cpu": 32, "cuda": 128}
SIDE, CHANNELS = 56, (32, 64, 64, 128)


def conv_graph(rng: np.random.Generator) -> bytes:
    nodes, inits, prev = [], [], "crops"
    for i, (cin, cout) in enumerate(zip(CHANNELS, CHANNELS[1:], strict=False)):
        k = 1 if i == 2 else 3
        w = (rng.standard_normal((cout, cin, k, k)) * (2 / (cin * k * k)) ** 0.5).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(np.zeros(cout, np.float32), f"b{i}")]
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[k // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev = f"r{i}"
    inits += [numpy_helper.from_array(rng.standard_normal((CHANNELS[-1], 10)).astype(np.float32), "wh"),
              numpy_helper.from_array(np.zeros(10, np.float32), "bh")]
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["gp"]),
              helper.make_node("Flatten", ["gp"], ["flat"]),
              helper.make_node("Gemm", ["flat", "wh", "bh"], ["logits"])]
    graph = helper.make_graph(
        nodes, "cropnet",
        [helper.make_tensor_value_info("crops", TensorProto.FLOAT, [None, CHANNELS[0], SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [None, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def main() -> None:
    a = options(__doc__.splitlines()[0], needs_torch_cuda=False)
    if a.device == "auto":
        a.device = "cpu"
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    providers = (["CUDAExecutionProvider"] if a.device == "cuda" else []) + ["CPUExecutionProvider"]
    sess = ort.InferenceSession(conv_graph(rng), providers=providers)
    b = BATCH[a.device]
    batches = [rng.standard_normal((b, CHANNELS[0], SIDE, SIDE), dtype=np.float32) for _ in range(3)]
    stop = StopFlag(a.seconds)
    n = i = 0
    while not stop:
        logits = sess.run(["logits"], {"crops": batches[i % 3]})[0]
        logits.argmax(axis=1)
        n += b
        i += 1
    report("ort_wide_batch", n, "crops", stop.elapsed(), a.device, f"batch {b}, providers {sess.get_providers()}")


if __name__ == "__main__":
    main()
