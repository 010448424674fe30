"""ONNX Runtime asked for the CUDA execution provider on a build that lacks it: silent CPU fallback."""

from __future__ import annotations


def build_model() -> bytes:
    """A small MLP scorer as ONNX (onnx.helper), random weights."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    dims = [512, 1024, 1024, 256]
    nodes, inits, prev = [], [], "x"
    for i in range(len(dims) - 1):
        w = numpy_helper.from_array(rng.standard_normal((dims[i], dims[i + 1])).astype(np.float32) * 0.03, f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"]))
        nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"]))
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "scorer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 512])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [None, 256])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def main() -> None:
    import numpy as np
    import onnxruntime as ort
    from _cli import Stop, options, report

    a = options(__doc__.splitlines()[0])
    # the usual copy-pasted line: CUDA first, CPU as the fallback, nothing checks what was granted
    sess = ort.InferenceSession(build_model(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
    stop = Stop(a.seconds)
    n = 0
    while not stop:
        sess.run(None, {"x": x})
        n += 1
    report("ort_cuda_missing", n, "batches", stop.elapsed(), ",".join(sess.get_providers()))


if __name__ == "__main__":
    main()
