"""What does a CUPTI window cost a launch-bound program, and what is safe with CUDA graphs?

Each scenario runs in a fresh process (CUPTI state is per process) and prints one
JSON line; scenarios are interleaved over repeats, so the host's drift between
runs (±20% on the H200) hits every scenario alike.

    python benchmarks/cupti_probe.py [--repeats 3] [--seconds 2] [SCENARIO ...]

Scenarios:
  plain              the loop alone (steps/s)
  kineto[:T]         torch.profiler: a throwaway init, then two 5-step windows;
                     T = TEARDOWN_CUPTI value ('unset', '0', '1'). Reports each
                     init/start/stop cost and the rate after each window.
  graph:T            a CUDA graph captured before the first window, replayed
                     around two windows, then a new capture after them
  compile:T          torch.compile(mode="reduce-overhead") with two windows
  cupti_win:O        cupti-python on the program's thread, two 5-step windows;
                     O contains 'rt' to record runtime API calls too, 'fin'
                     to cuptiFinalize after each window
  cupti_thread       NVIDIA's cupti-python Activity API enabled from another
                     thread (kernels, memcpy, runtime), then flushed and
                     finalized: its init cost, the loop's rate during init,
                     during collection and after finalize
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT = ("plain", "kineto:unset", "kineto:1", "kineto:0", "graph:1", "graph:0", "compile:1",
           "compile:unset", "cupti_thread")


def _model():
    import torch

    torch.manual_seed(0)
    blocks = []
    for _ in range(24):  # batch-1 ranker: ~100 tiny kernels per step
        blocks += [torch.nn.Linear(256, 256), torch.nn.LayerNorm(256), torch.nn.GELU()]
    return torch.nn.Sequential(*blocks).cuda().eval(), torch.randn(1, 256, device="cuda")


def _rate(step, seconds: float) -> float:
    import torch

    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        torch.cuda.synchronize()
        n += 1
    return n / (time.perf_counter() - t0)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _window(step, out: dict, key: str, tmp: str) -> None:
    import torch

    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    prof = torch.profiler.profile(activities=acts)
    out[f"{key}_start_s"] = _timed(prof.start)
    for _ in range(5):
        step()
    torch.cuda.synchronize()

    def stop() -> None:
        prof.stop()
        prof.export_chrome_trace(os.path.join(tmp, f"{key}.json"))

    out[f"{key}_stop_s"] = _timed(stop)
    with open(os.path.join(tmp, f"{key}.json")) as f:
        out[f"{key}_kernels"] = sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel")


def child(scenario: str, seconds: float) -> dict:
    import torch

    name, _, teardown = scenario.partition(":")
    out: dict = {"scenario": scenario, "torch": torch.__version__}
    t0 = time.perf_counter()
    model, x = _model()
    out["setup_s"] = time.perf_counter() - t0
    with torch.inference_mode():
        def step():
            return model(x)

        if name == "compile":
            t0 = time.perf_counter()
            cmodel = torch.compile(model, mode="reduce-overhead")
            for _ in range(5):
                cmodel(x)
            torch.cuda.synchronize()
            out["compile_s"] = time.perf_counter() - t0
            out["teardown_env_after_compile"] = os.environ.get("TEARDOWN_CUPTI")

            def step():  # noqa: F811 - the compiled step replaces the eager one
                return cmodel(x)
        if teardown in ("0", "1"):  # set after compile: torch sets it there itself
            os.environ["TEARDOWN_CUPTI"] = teardown
        elif teardown == "unset":
            os.environ.pop("TEARDOWN_CUPTI", None)
        graph_step = None
        if name == "graph":
            static_x = x.clone()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(static_x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                model(static_x)
            graph_step = g.replay
            step = g.replay  # noqa: F811
        _rate(step, 0.5)
        out["rate_before"] = _rate(step, seconds)
        if name == "plain":
            return out
        if name == "cupti_thread":
            return _cupti_thread(step, seconds, out)
        if name == "cupti_win":
            return _cupti_windows(step, seconds, out, runtime="rt" in teardown, finalize="fin" in teardown)
        with tempfile.TemporaryDirectory() as tmp:
            acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]

            def init() -> None:
                p = torch.profiler.profile(activities=acts)
                p.start()
                p.stop()

            out["init_s"] = _timed(init)
            out["rate_after_init"] = _rate(step, seconds)
            _window(step, out, "w1", tmp)
            out["rate_after_w1"] = _rate(step, seconds)
            _window(step, out, "w2", tmp)
            out["rate_after_w2"] = _rate(step, seconds)
        if graph_step is not None:  # a capture after the windows (and any teardown)
            g2 = torch.cuda.CUDAGraph()
            static_x = x.clone()
            with torch.cuda.graph(g2):
                model(static_x)
            out["rate_new_graph"] = _rate(g2.replay, seconds)
    out["ok"] = True
    return out


def _cupti_thread(step, seconds: float, out: dict) -> dict:
    """cupti-python's Activity API, enabled off the program's thread."""
    from cupti import cupti

    records: list = []

    def buffer_requested():
        return 8 * 1024 * 1024, 0

    def buffer_completed(activities):
        records.extend(activities)

    kinds = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.RUNTIME]
    done: dict = {}

    def enable() -> None:
        t = time.perf_counter()
        cupti.activity_register_callbacks(buffer_requested, buffer_completed)
        for k in kinds:
            cupti.activity_enable(k)
        done["s"] = time.perf_counter() - t

    th = threading.Thread(target=enable)
    n, t0 = 0, time.perf_counter()
    th.start()
    while th.is_alive():
        step()
        n += 1
    import torch

    torch.cuda.synchronize()
    out["init_s"] = done.get("s")
    out["rate_during_init"] = n / max(1e-9, time.perf_counter() - t0)
    out["rate_collecting"] = _rate(step, seconds)
    t = time.perf_counter()
    for k in kinds:
        cupti.activity_disable(k)
    cupti.activity_flush_all(1)
    out["flush_s"] = time.perf_counter() - t
    out["records"] = len(records)
    out["kernel_records"] = sum(1 for r in records if r.kind == cupti.ActivityKind.CONCURRENT_KERNEL)
    out["finalize_s"] = _timed(cupti.finalize)
    out["rate_after_finalize"] = _rate(step, seconds)
    out["ok"] = True
    return out


def _cupti_windows(step, seconds: float, out: dict, runtime: bool, finalize: bool) -> dict:
    """cupti-python on the program's thread: two 5-step windows, each enable -> steps -> disable + flush."""
    import torch
    from cupti import cupti

    records: list = []
    kinds = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY]
    if runtime:
        kinds.append(cupti.ActivityKind.RUNTIME)
    for w in (1, 2):
        t = time.perf_counter()
        cupti.activity_register_callbacks(lambda: (8 * 1024 * 1024, 0), records.extend)
        for k in kinds:
            cupti.activity_enable(k)
        out[f"w{w}_start_s"] = time.perf_counter() - t
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for k in kinds:
            cupti.activity_disable(k)
        cupti.activity_flush_all(1)
        if finalize:
            cupti.finalize()
        out[f"w{w}_stop_s"] = time.perf_counter() - t
        out[f"w{w}_kernels"] = sum(1 for r in records if r.kind == cupti.ActivityKind.CONCURRENT_KERNEL)
        records.clear()
        out[f"rate_after_w{w}"] = _rate(step, seconds)
    out["ok"] = True
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenarios", nargs="*", default=list(DEFAULT))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.seconds)), flush=True)
        return
    results: dict[str, list[dict]] = {s: [] for s in a.scenarios}
    for _ in range(a.repeats):
        for s in a.scenarios:
            p = subprocess.run([sys.executable, __file__, "--child", s, "--seconds", str(a.seconds)],
                               capture_output=True, text=True, timeout=600)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            res = json.loads(line[7:]) if line else {"scenario": s, "ok": False,
                                                     "rc": p.returncode, "stderr": p.stderr[-600:]}
            res["rc"] = p.returncode
            results[s].append(res)
            print(json.dumps(res), flush=True)
    print("\nmedians (rates relative to the same process's rate_before):")
    for s, runs in results.items():
        ok = [r for r in runs if r.get("ok")]
        keys = sorted({k for r in ok for k, v in r.items() if isinstance(v, (int, float)) and k != "rc"})
        row = {}
        for k in keys:
            vals = [r[k] / r["rate_before"] if k.startswith("rate_") and k != "rate_before" else r[k]
                    for r in ok if k in r]
            row[k] = round(statistics.median(vals), 4)
        print(s, f"ok {len(ok)}/{len(runs)}", "rc", [r["rc"] for r in runs], json.dumps(row))


if __name__ == "__main__":
    main()
