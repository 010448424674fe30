"""onnxruntime hooks, through a real target process and a real ONNX model built in the test."""

from __future__ import annotations

import pytest
from hooks_support import details, run_target

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def _model(path: str) -> None:
    """Y = relu(X @ W), X: [N, 4] float."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 2), dtype=np.float32), name="W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["H"]), helper.make_node("Relu", ["H"], ["Y"])],
        "tiny", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


TARGET = """
import numpy as np, onnxruntime as ort
ort.set_default_logger_severity(4)   # the CUDA fallback on a GPU-less host logs an error
sess = ort.InferenceSession("tiny.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
for _ in range(3):
    (y,) = sess.run(None, {"X": np.ones((5, 4), dtype=np.float32)})
assert y.shape == (5, 2) and float(y[0, 0]) == 4.0
binding = sess.io_binding()
binding.bind_cpu_input("X", np.ones((6, 4), dtype=np.float32))
binding.bind_output("Y")
sess.run_with_iobinding(binding)
cpu = ort.InferenceSession("tiny.onnx", providers=["CPUExecutionProvider"])
cpu.run(["Y"], {"X": np.ones((2, 4), dtype=np.float32)})
print("providers", sess.get_providers())
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ort_target")
    _model(str(tmp / "tiny.onnx"))
    run, proc = run_target(tmp, TARGET)
    assert proc.returncode == 0, proc.stderr
    return run, proc


def test_runs_are_steps(recorded) -> None:
    run, _ = recorded
    steps = run.table("steps")
    assert list(steps["source"]) == ["ort"] * 5
    assert list(steps["batch"]) == [5, 5, 5, -1, 2]  # -1: run_with_iobinding has no feed to look at
    assert steps["shapes"].iloc[0] == "[[5,4]]" and steps["dtype"].iloc[0] == "float32"
    assert steps["model"].iloc[0].endswith("tiny.onnx")
    assert steps["device"].iloc[-1] == "CPUExecutionProvider"
    assert list(steps["seq"]) == list(range(5)) and (steps["dur_ns"] > 0).all()


def test_session_events_show_providers_and_fallback(recorded) -> None:
    run, proc = recorded
    ev = run.table("events")
    loads = details(ev, "model_load")
    assert len(loads) == 2 and all(d["file"].endswith("tiny.onnx") and d["bytes"] > 0 for d in loads)
    first, second = details(ev, "ort_session")
    assert first["requested"] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert "fallback" not in first  # a fact the analysis decides (analysis/runtime.py)
    assert str(first["got"]) in proc.stdout
    assert second == {"requested": ["CPUExecutionProvider"], "got": ["CPUExecutionProvider"]}
    assert first["got"][0] == run.table("steps")["device"].iloc[0]
    (imp,) = details(ev, "import")
    assert imp["version"]
    assert "first_step" in set(ev["kind"]) and "note" not in set(ev["kind"])
