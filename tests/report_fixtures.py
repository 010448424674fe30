"""Shared helpers for the report tests: a hand-made Diagnosis and hostile runs.

(No tests here; the other test_report_* modules import these.)
"""

from __future__ import annotations

import os

import pandas as pd

from diag.engine.diagnosis import Diagnosis, Evidence, Finding, Phase, Recommendation
from diag.store.manifest import read_manifest, write_manifest
from diag.synthetic import write_synthetic_run

PAYLOAD = "</script><img src=x onerror=alert(1)>"


def make_diagnosis(duration_s: float, primary: str | None = "compute_bound", hostile: str = "") -> Diagnosis:
    """A Diagnosis shaped like the engine's, for a synthetic run of `duration_s`."""
    extra = f" {hostile}" if hostile else ""
    return Diagnosis(
        run={"command": ["python", "serve.py"], "exit_code": 0, "duration_s": duration_s, "device": "cuda",
             "gpu": "NVIDIA H200"},
        primary=primary,
        scores={"compute_bound": 0.82, "cpu_bound": 0.31, "transfer_bound": 0.12, "cold_start": 0.05},
        phases=[Phase("startup", 0.0, 4.5), Phase("warmup", 4.5, 5.0), Phase("steady", 5.0, duration_s)],
        findings=[
            Finding(rule="gpu.tensor_cores_busy", label=primary, severity="high",
                    title="GEMMs keep the tensor cores busy" + extra, score=0.82,
                    evidence=[Evidence("steady.gpu_busy", 0.86, "ratio", "> 0.7"),
                              Evidence("steady.tensor_active", 55.0, "%", "> 40")],
                    recommendations=[Recommendation(
                        text="Use a smaller dtype or a fused attention kernel." + extra,
                        code="model = torch.compile(model, mode='max-autotune')" + extra,
                        expected_gain="up to 30% of step time")]),
            Finding(rule="transfer.pageable_h2d", label="transfer_bound", severity="medium",
                    title="Inputs are copied from pageable memory", score=0.12,
                    evidence=[Evidence("steady.copy_share", 0.08, "ratio", "> 0.05")],
                    recommendations=[Recommendation(text="Pin the input buffers.",
                                                    code="x = x.pin_memory().to('cuda', non_blocking=True)",
                                                    expected_gain="up to 8% of wall time")]),
        ],
        metrics={"steady.inside_model_share": 0.6, "steady.outside_busy_share": 0.3,
                 "steady.outside_wait_share": 0.1, "steady.copy_share": 0.08, "steady.sync_share": 0.02,
                 "steady.gpu_busy": 0.86, "run.gpu": 1.0},
        units={"steady.gpu_busy": "ratio"},
    )


def write_hostile_run(path: str, duration_s: float = 20.0, payload: str = PAYLOAD) -> str:
    """A synthetic GPU run with `payload` as an NVTX range name, a stack frame, a kernel name,
    in argv, in an env value and in a collector's reason."""
    write_synthetic_run(path, duration_s, "gpu_compute")
    ranges = pd.read_parquet(os.path.join(path, "ranges.parquet"))
    extra = ranges.head(50).copy()
    extra["name"], extra["kind"] = payload, "stage"
    pd.concat([ranges, extra], ignore_index=True).to_parquet(os.path.join(path, "ranges.parquet"), index=False)

    stacks = pd.read_parquet(os.path.join(path, "stacks.parquet"))
    stacks.loc[stacks.index[::3], "stack"] = stacks["stack"].iloc[0] + f";{payload} (evil.py:1)"
    stacks.to_parquet(os.path.join(path, "stacks.parquet"), index=False)

    kernels = pd.read_parquet(os.path.join(path, "kernels.parquet"))
    kernels.loc[kernels["category"] == "gemm", "name"] = payload
    kernels.loc[kernels["category"] == "norm", "category"] = payload
    kernels.loc[kernels["kind"] == "memcpy", "src_mem"] = payload
    kernels.to_parquet(os.path.join(path, "kernels.parquet"), index=False)

    m = read_manifest(path)
    m["command"] = ["python", "serve.py", payload]
    m["cwd"] = payload
    m["env"] = {"CUDA_VISIBLE_DEVICES": payload}
    m["host"]["hostname"] = payload
    m["collectors"]["stacks"]["reason"] = payload
    write_manifest(path, m)
    return path
