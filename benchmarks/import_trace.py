"""Importing a large Kineto trace: wall time and peak memory of `read_kineto` (issue 13 item 7).

Writes a synthetic torch.profiler trace of about --mb MB (host ops with their
args, runtime launches, kernels with CUPTI's args, memcpys, ProfilerStep# and
user annotations, baseTimeNanoseconds after the events as Kineto writes it),
then reads it in a fresh child process per run, with each diag checkout given
(--checkout DIR, repeatable; default: this one), and prints the wall time of
read_kineto and the child's peak RSS (ru_maxrss from wait4) next to the file size.

    git worktree add /tmp/kin-base <commit before the change>
    .venv/bin/python benchmarks/import_trace.py --mb 300 --checkout /tmp/kin-base --checkout .
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

KERNELS = ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)",
           "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off",
           "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>>",
           "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float>>>",
           "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"]
OPS = ["aten::linear", "aten::addmm", "aten::add", "aten::layer_norm", "aten::scaled_dot_product_attention"]
# The child: read the trace with whichever diag is first on sys.path, report the time.
CHILD = """
import resource, sys, time
# the checkout given, not the editable install's finder
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path.insert(0, sys.argv[2])
t0 = time.perf_counter()
from diag.store.kineto import read_kineto
import diag
t1 = time.perf_counter()
base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run = read_kineto(sys.argv[1])
t2 = time.perf_counter()
print(diag.__file__, len(run.table("kernels")), t1 - t0, t2 - t1, base_kb)
"""


def write_trace(path: str, mb: int) -> int:
    """A synthetic Kineto trace of about `mb` MB; returns its size in bytes."""
    target = mb << 20
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", '
                '"totalGlobalMem": 85032321024}], "distributedInfo": {"backend": "nccl", "rank": 0, '
                '"world_size": 2},\n"traceEvents": [\n')
        ts, corr, step, first = 1000.0, 0, 0, True
        while f.tell() < target:
            events = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{step}", "pid": 7, "tid": 7,
                       "ts": ts, "dur": 900.0, "args": {"External id": corr, "Record function id": 0}},
                      {"ph": "X", "cat": "user_annotation", "name": f"request {step}", "pid": 7, "tid": 7,
                       "ts": ts + 1, "dur": 880.0, "args": {"External id": corr}}]
            for i in range(40):
                corr += 1
                t = ts + 2 + i * 20
                name = KERNELS[i % len(KERNELS)]
                events += [
                    {"ph": "X", "cat": "cpu_op", "name": OPS[i % len(OPS)], "pid": 7, "tid": 7, "ts": t,
                     "dur": 12.5, "args": {"External id": corr, "Record function id": 0, "Ev Idx": i,
                                           "Input Dims": [[8, 1024, 4096], [4096, 4096], []],
                                           "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"],
                                           "Input Strides": [[4194304, 4096, 1], [1, 4096], []],
                                           "Concrete Inputs": ["", "", "1"], "Sequence number": corr,
                                           "Fwd thread id": 0}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7,
                     "ts": t + 3, "dur": 4.25, "args": {"External id": corr, "cbid": 211, "correlation": corr}},
                    {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 9, "dur": 15.125,
                     "args": {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": 7,
                              "correlation": corr, "registers per thread": 128, "shared memory": 49152,
                              "blocks per SM": 1.2345, "warps per SM": 9.876, "grid": [132, 1, 1],
                              "block": [384, 1, 1], "est. achieved occupancy %": 19}},
                    {"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t + 9, "cat": "ac2g", "name": "ac2g",
                     "bp": "e"}]
            events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
                           "tid": 7, "ts": ts + 850, "dur": 30.0,
                           "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": 1 << 22,
                                    "memory bandwidth (GB/s)": 12.5}})
            text = ",\n".join(json.dumps(e) for e in events)
            f.write(text if first else ",\n" + text)
            first = False
            ts += 1000.0
            step += 1
        f.write('\n],\n"traceName": "synthetic", "displayTimeUnit": "ms", '
                '"baseTimeNanoseconds": 1700000000000000000}\n')
        return f.tell()


def measure(checkout: str, path: str) -> tuple[str, int, float, float, int, int]:
    """(diag file, kernels, import s, read s, peak RSS bytes, RSS bytes after imports) of one fresh child."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, os.path.abspath(checkout)],
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{checkout}: child failed ({proc.returncode})")
    diag_file, kernels, t_import, t_read, base_kb = out.split()
    return diag_file, int(kernels), float(t_import), float(t_read), usage.ru_maxrss * 1024, int(base_kb) * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=300, help="trace size in MB")
    ap.add_argument("--checkout", action="append", help="a diag checkout to measure (repeatable)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per checkout (the fastest is shown)")
    ap.add_argument("--trace", help="read this trace instead of writing one")
    args = ap.parse_args()
    checkouts = args.checkout or [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    with tempfile.TemporaryDirectory() as tmp:
        path = args.trace or os.path.join(tmp, "trace.json")
        size = os.path.getsize(path) if args.trace else write_trace(path, args.mb)
        print(f"trace {path}: {size / 2**20:.0f} MB")
        for checkout in checkouts:
            runs = [measure(checkout, path) for _ in range(args.repeat)]
            best = min(runs, key=lambda r: r[3])
            peak = max(r[4] for r in runs)
            print(f"{checkout}: read_kineto {best[3]:.1f} s (runs {', '.join(f'{r[3]:.1f}' for r in runs)}), "
                  f"peak RSS {peak / 2**20:.0f} MB = {peak / size:.2f}x the file, "
                  f"{(peak - best[5]) / size:.2f}x above the {best[5] / 2**20:.0f} MB of the imports "
                  f"(import of diag {best[2]:.1f} s; {best[1]} kernel rows; {best[0]})")


if __name__ == "__main__":
    main()
