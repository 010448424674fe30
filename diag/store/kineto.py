"""PyTorch profiler / Kineto chrome-trace JSON -> rows of kernels, steps, ranges.

Used two ways: as the derived table `kernels` of a run (every
`raw/kineto/window<N>.<pid>.json` written by diag/collect/kernel_windows.py),
and as the importer of `diag analyze trace.json` (`read_kineto`, registered
in diag/store/importers.py).

Time: Kineto's `ts` is in microseconds. Traces from torch >= 2.1 carry
`baseTimeNanoseconds`, and `baseTimeNanoseconds + ts * 1000` is Unix-epoch
nanoseconds (checked against `time.time_ns()` on torch 2.13). Older traces
have no base: the caller passes the window's recorded start (`ts_ns` of its
`windows` row) and the earliest event of the trace is aligned to it.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any

from diag.errors import DiagError
from diag.store.importers import span, trace_run
from diag.store.jsonl import RAW_DIR, read_raw
from diag.store.run import Run, derived_table
from diag.store.safe import int64, loads, read_bytes
from diag.store.trace_stream import stream_trace

# Kernel name -> category, first match wins. Order matters: an attention or
# norm kernel may also say "cutlass" or "vectorized", an implicit-GEMM conv
# says "gemm".
CATEGORY_PATTERNS: list[tuple[str, str]] = [
    # Collectives and peer copies first: NCCL/RCCL kernels say "Reduce", "Sum", "Copy"
    # and would pass for reductions or elementwise work. HCCL and gloo ops, the
    # symmetric-memory and custom all-reduce kernels of torch/vLLM/SGLang, nvshmem.
    ("communication", r"nccl|rccl|hccl|msccl|gloo|nvshmem|multimem_all_reduce|one_?shot_all_?reduce"
                      r"|two_?shot_all_?reduce|cross_device_reduce|custom_?all_?reduce|all_?reduce|all_?gather"
                      r"|reduce_?scatter|all_?to_?all|sendrecv"),
    # torch.compile (Inductor) names say what they are in their prefix.
    ("elementwise", r"^triton_poi_"),
    ("reduction", r"^triton_(red|per)_"),
    ("gemm", r"^triton_tem_"),
    ("attention", r"flash|fmha|attention|attn|sdpa|mha_|scaled_dot_product"),
    ("norm", r"layer_?norm|batch_?norm|group_?norm|instance_?norm|rms_?norm|bn_fw|bn_bw|moments|welford"),
    ("conv", r"conv(?!ert)|cudnn|implicit_?gemm|implicit_convolve|winograd|fprop|dgrad|wgrad|igemm_|miopen"),
    # GEMM families: cuBLAS/cuBLASLt (sm90_xmma, nvjet), CUTLASS (sm100 included), AMD
    # Tensile and hipBLASLt (Cijk_...), Composable Kernel, vLLM's skinny ROCm GEMMs,
    # Blackwell trtllm-gen batched GEMMs (bmm_E4m3..., bmm_Bfloat16...), Triton matmuls
    # (_matmul_ogs from triton_kernels, fused_moe_kernel).
    ("gemm", r"gemm|gemv|cutlass|cublas|nvjet|wgmma|xmma|matmul|^cijk_|hipblaslt|^bmm_|wvsplitk|fused_moe"),
    ("reduction", r"reduce|reduction|softmax|argmax|argmin|topk|cumsum|scan_"),
    # MIOpen's tensor ops (SubTensorOpWithScalar1d, OpTensorFwdBias, Op2dTensorGeneric) and pooling
    # read and write whole tensors with little math: elementwise work.
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|copy_kernel|fill_kernel|catarray|transpose"
                    r"|gather_kernel|scatter|index_kernel|multi_tensor_apply|act_and_mul|reshape_and_cache"
                    r"|subtensorop|^op(?:\dd)?tensor|max_pool|avg_pool|adaptive_(?:max|avg)_pool"),
]
_CATEGORY_RES = [(cat, re.compile(pat, re.IGNORECASE)) for cat, pat in CATEGORY_PATTERNS]

# "Memcpy HtoD (Pageable -> Device)" -> copy kind, source memory, destination memory.
_MEMCPY_RE = re.compile(r"memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# Serving engines' own step ranges, used where a trace has no ProfilerStep#: vLLM
# (execute_model, the model runner), SGLang (step[DECODE bs=..], run_batch), TraceLens captures.
_ENGINE_STEP_RE = re.compile(r"^(?:vllm::)?execute_model\b|^step\[(?:decode|extend|prefill|mixed)\b"
                             r"|^execute_(?:\d+_)?context_"  # TraceLens' inference capture: one per execution
                             r"|^(?:gpu_)?model_?runner.*(?:forward|execute)|^run_batch\b", re.IGNORECASE)
# Annotations named like a request: "request", "request 12", "req-3", "generate_request".
_REQUEST_RE = re.compile(r"^(?:generate_)?(?:request|req)(?:$|[\s#:_-]*\d)", re.IGNORECASE)
# Host spans that feed the model: a DataLoader's next batch, named preprocessing.
_INPUT_RE = re.compile(r"dataloader|preprocess|collate|tokeniz", re.IGNORECASE)
# Categories of the host timeline across Kineto versions (2021 traces say Operator, Runtime).
CPU_CATS = {"cpu_op", "operator", "user_annotation", "python_function", "cpu_instant_event", ""}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
# Activity of accelerators diag cannot read as GPU kernels (their categories name them).
_OTHER_ACCEL_RE = re.compile(r"^(mtia|hpu|xpu|tpu|npu|ipu)_", re.IGNORECASE)
_WINDOW_FILE_RE = re.compile(r"window(\d+)\.(\d+)\.json$")

KERNEL_CATS = {"kernel"}
MEMCPY_CATS = {"gpu_memcpy", "memcpy"}
MEMSET_CATS = {"gpu_memset", "memset"}


def kernel_category(name: str) -> str:
    """The category of a GPU kernel from its name (CATEGORY_PATTERNS), else `other`."""
    for cat, pattern in _CATEGORY_RES:
        if pattern.search(name):
            return cat
    return "other"


def memcpy_kinds(name: str) -> tuple[str | None, str | None, str | None]:
    """(copy_kind, src_mem, dst_mem) from a memcpy name such as `Memcpy HtoD (Pageable -> Device)`."""
    m = _MEMCPY_RE.search(name)
    if not m:
        return None, None, None
    kind, src, dst = m.group(1), m.group(2), m.group(3)
    return kind, src.lower() if src else None, dst.lower() if dst else None


@dataclass
class KinetoTables:
    """Rows parsed from one trace, in the column layout of docs/run-format.md."""

    kernels: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    ranges: list[dict[str, Any]] = field(default_factory=list)
    pid: int | None = None
    skipped: int = 0  # events left out: times that are no number or beyond int64
    other_accelerator: str | None = None  # MTIA, HPU...: activity diag does not read as GPU kernels


def load_trace(path: str, follow: bool = True) -> dict[str, Any]:
    """Read a chrome-trace JSON (object with traceEvents, or a bare event list; gzip allowed).

    Raises ValueError on a file that is no trace (callers decide how loud to be), DiagError
    on one diag refuses to read (not a regular file, over the size caps: diag/store/safe.py).
    `follow=False` inside a run directory: a symlink there is refused.
    """
    data = loads(read_bytes(path, follow=follow))
    if isinstance(data, list):
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError("no traceEvents list")
    return data


def _offset_ns(trace: dict[str, Any], first_ts: int | None, start_ns: int | None) -> int:
    """What to add to the trace's own times: its base time, else `start_ns` less its first event."""
    base = trace.get("baseTimeNanoseconds")
    if isinstance(base, (int, float)) and not isinstance(base, bool) and base > 0:
        if int64(base) is None:
            raise ValueError("baseTimeNanoseconds beyond int64")
        return int(base)
    if start_ns is not None and first_ts is not None:
        return int64(start_ns - first_ts) or 0
    return 0  # times stay relative to the trace's own origin


def _ns(us: Any) -> int | None:
    """Microseconds (a number) as int64 ns; None for anything else (text, bool, beyond int64)."""
    if isinstance(us, bool) or not isinstance(us, (int, float)):
        return None
    return int64(round(us * 1000)) if abs(us) < 2**62 / 1000 else None


def _str(v: Any) -> str:
    return v if isinstance(v, str) else str(v) if isinstance(v, (int, float, bool)) else ""


def _dims(v: Any) -> str | None:
    if isinstance(v, list):
        return "[" + ",".join(str(x) for x in v) + "]"
    return None


# Bytes per element of the dtypes PyTorch names in a collective kernel's args
_DTYPE_BYTES = {"float": 4, "float32": 4, "int": 4, "int32": 4, "uint32": 4, "double": 8, "float64": 8,
                "long": 8, "int64": 8, "uint64": 8, "half": 2, "float16": 2, "bfloat16": 2, "short": 2,
                "int16": 2, "byte": 1, "char": 1, "bool": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1,
                "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}


def message_bytes(args: dict[str, Any]) -> int | None:
    """A collective kernel's message size from the args PyTorch adds (`In msg nelems`, `Out msg
    nelems`, `dtype`): the larger of input and output (an all-gather's output is the message)."""
    size = _DTYPE_BYTES.get(str(args.get("dtype", "")).lower().replace("torch.", ""))
    nelems = [n for n in (int64(args.get("In msg nelems")), int64(args.get("Out msg nelems"))) if n is not None]
    if size is None or not nelems or max(nelems) <= 0:
        return None
    return max(nelems) * size


def _int(v: Any, default: int = -1) -> int:
    n = int64(v)
    return default if n is None else n


def parse_trace(trace: dict[str, Any], window: int = 0, start_ns: int | None = None) -> KinetoTables:
    """Rows of kernels (kernel, memcpy, memset), steps and ranges (annotations, input spans).

    Steps are `ProfilerStep#N` under any host category (2021 traces file them under
    `Operator`), else a serving engine's own step ranges (_ENGINE_STEP_RE). A kernel's
    `launch_ns` is when the host called its launch (runtime event of the same
    correlation id), so the launch->start delay can be measured; -1 when unknown.
    """
    return parse_events(trace["traceEvents"], trace, window, start_ns)


def parse_events(raw_events: Any, trace: dict[str, Any], window: int = 0,
                 start_ns: int | None = None) -> KinetoTables:
    """parse_trace over any iterable of events (a list, or diag/store/trace_stream.py's).

    One pass, keeping only the fields diag uses: `trace` is read after the last event,
    since a streamed trace's baseTimeNanoseconds comes after its traceEvents. Times are
    gathered relative to the trace and shifted once at the end; a row whose shifted time
    leaves int64 is skipped (counted), as is an event whose times are no numbers.
    """
    out = KinetoTables()
    annotations: list[dict[str, Any]] = []
    engine_steps: list[dict[str, Any]] = []
    launches: dict[int, int] = {}
    texts: dict[str, str] = {}  # one copy of each kernel name and grid: they repeat by the thousand
    first_ts: int | None = None
    for e in raw_events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur_ns = _ns(e.get("ts")), _ns(e.get("dur", 0))
        if ts is not None and (first_ts is None or ts < first_ts):
            first_ts = ts
        if ts is None or dur_ns is None or int64(ts + dur_ns) is None:
            out.skipped += 1
            continue
        cat = _str(e.get("cat", "")).lower()
        name = _str(e.get("name", ""))
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if cat in KERNEL_CATS or cat in MEMCPY_CATS or cat in MEMSET_CATS:
            name = texts.setdefault(name, name)
            grid, block = _dims(args.get("grid")), _dims(args.get("block"))
            row: dict[str, Any] = {
                "ts_ns": ts, "dur_ns": dur_ns, "window": window,
                "device": _int(args.get("device", e.get("pid"))),
                "stream": _int(args.get("stream", e.get("tid"))),
                "name": name, "category": None, "kind": None, "copy_kind": None,
                "src_mem": None, "dst_mem": None, "bytes": None,
                "grid": grid and texts.setdefault(grid, grid), "block": block and texts.setdefault(block, block),
                "launch_ns": _int(args.get("correlation")),  # a correlation id until resolved below
            }
            if cat in KERNEL_CATS:
                row["kind"], row["category"] = "kernel", _category(name, texts)
                if row["category"] == "communication":
                    row["bytes"] = message_bytes(args)
            elif cat in MEMCPY_CATS:
                row["kind"] = row["category"] = "memcpy"
                row["copy_kind"], row["src_mem"], row["dst_mem"] = memcpy_kinds(name)
                row["bytes"] = _int(args.get("bytes"))
            else:
                row["kind"] = row["category"] = "memset"
                row["bytes"] = _int(args.get("bytes"))
            out.kernels.append(row)
            continue
        if cat in LAUNCH_CATS:
            corr = int64(args.get("correlation"))
            if corr is not None:
                launches[corr] = ts
        if _OTHER_ACCEL_RE.match(cat):
            out.other_accelerator = out.other_accelerator or cat.split("_")[0].upper()
            continue
        if cat not in CPU_CATS:
            continue
        pid, tid = _int(e.get("pid")), _int(e.get("tid"))
        if out.pid is None and cat != "":
            out.pid = pid
        step = _STEP_RE.match(name)
        if step:
            out.steps.append(_step_row(ts, dur_ns, pid, tid, "torch", _int(int(step.group(1)[:20]))))
        elif cat == "user_annotation" and _ENGINE_STEP_RE.search(name):
            engine_steps.append(_step_row(ts, dur_ns, pid, tid, "engine", len(engine_steps)))
        elif cat == "user_annotation" or (cat in ("cpu_op", "operator") and _INPUT_RE.search(name)):
            kind = "request" if _REQUEST_RE.match(name) else "stage"
            annotations.append({
                "ts_ns": ts, "dur_ns": dur_ns, "pid": pid, "tid": tid,
                "name": "dataloader" if kind == "stage" and "dataloader" in name.lower() else name,
                "kind": kind, "source": "kineto", "domain": None, "depth": 0,
            })
    offset = _offset_ns(trace, first_ts, start_ns)
    out.kernels = _shifted(out, out.kernels, offset)
    out.steps = _shifted(out, out.steps, offset) or _outermost(_shifted(out, engine_steps, offset))
    for row in out.kernels:
        rel = launches.get(row["launch_ns"]) if row["launch_ns"] >= 0 else None
        launch = int64(rel + offset) if rel is not None else None
        row["launch_ns"] = -1 if launch is None else launch
    out.ranges = nest_depths(_shifted(out, annotations, offset))
    return out


def _category(name: str, cache: dict[str, str]) -> str:
    """kernel_category, once per distinct name (the cache is shared with the texts)."""
    key = "\0cat\0" + name
    cat = cache.get(key)
    if cat is None:
        cat = cache[key] = kernel_category(name)
    return cat


def _shifted(out: KinetoTables, rows: list[dict[str, Any]], offset: int) -> list[dict[str, Any]]:
    """Rows with `offset` added to ts_ns; those whose start or end leaves int64 dropped and counted."""
    if not offset:
        return rows
    kept = []
    for r in rows:
        ts = int64(r["ts_ns"] + offset)
        if ts is None or int64(ts + r["dur_ns"]) is None:
            out.skipped += 1
            continue
        r["ts_ns"] = ts
        kept.append(r)
    return kept


def _step_row(ts_ns: int, dur_ns: int, pid: int, tid: int, source: str, seq: int) -> dict[str, Any]:
    return {"ts_ns": ts_ns, "dur_ns": dur_ns, "pid": pid, "tid": tid, "source": source,
            "model": None, "batch": -1, "shapes": None, "dtype": None, "device": None,
            "gpu_ns": -1, "syncs": -1, "seq": seq, "in_window": True}


def _outermost(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Engine step ranges that no other one on their thread encloses (execute_model inside step[])."""
    kept: list[dict[str, Any]] = []
    ends: dict[tuple[int, int], int] = {}
    for r in sorted(steps, key=lambda r: (r["ts_ns"], -r["dur_ns"])):
        key = (r["pid"], r["tid"])
        if r["ts_ns"] < ends.get(key, -1):
            continue
        ends[key] = r["ts_ns"] + r["dur_ns"]
        kept.append(r)
    for i, r in enumerate(kept):
        r["seq"] = i
    return kept


def nest_depths(ranges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set `depth` of each range from how many ranges on its thread enclose it."""
    ranges = sorted(ranges, key=lambda r: (r["pid"], r["tid"], r["ts_ns"], -r["dur_ns"]))
    open_ends: dict[tuple[int, int], list[int]] = {}
    for r in ranges:
        stack = open_ends.setdefault((r["pid"], r["tid"]), [])
        while stack and stack[-1] <= r["ts_ns"]:
            stack.pop()
        r["depth"] = len(stack)
        stack.append(r["ts_ns"] + r["dur_ns"])
    return ranges


def _window_starts(run_dir: str) -> dict[tuple[int, int], int]:
    """(window, pid) -> ts_ns of its windows row, to align traces without a base time."""
    starts: dict[tuple[int, int], int] = {}
    for row in read_raw(run_dir, "windows"):  # the recorder writes pid into every row
        window, ts_ns = int64(row.get("window")), int64(row.get("ts_ns"))
        if window is not None and ts_ns is not None:
            starts[(window, _int(row.get("pid", -1)))] = ts_ns
    return starts


@derived_table("kernels")
def kernels_of_run(run_dir: str) -> list[dict[str, Any]]:
    """The kernels table of a run: every raw/kineto/window<N>.<pid>.json, parsed.

    A trace that cannot be read (cut short by a kill) is skipped; the others still count.
    """
    starts = _window_starts(run_dir)
    rows: list[dict[str, Any]] = []
    for path in sorted(glob.glob(os.path.join(run_dir, RAW_DIR, "kineto", "*.json"))):
        m = _WINDOW_FILE_RE.search(os.path.basename(path))
        window, pid = (int(m.group(1)), int(m.group(2))) if m else (0, -1)
        top: dict[str, Any] = {}
        try:
            parsed = parse_events(stream_trace(path, top, follow=False), top, window, starts.get((window, pid)))
        except ValueError:
            continue
        for row in parsed.kernels:
            row["pid"] = pid
            rows.append(row)
    return rows


def read_kineto(path: str) -> Run:
    """The Run of a PyTorch profiler (Kineto) trace file: kernels, memcpy, memset, steps
    (`ProfilerStep#N`, else engine step ranges), ranges from `user_annotation` and input
    spans; DiagError if it is no such trace.

    The events are streamed (diag/store/trace_stream.py): memory stays near the rows kept.
    The one window spans the GPU activity (first GPU event to the last end), not the
    host's annotations around it: a CPU range that opens long before the first kernel
    would count as GPU idle time. `distributedInfo` gives the rank (manifest `distributed`).
    """
    trace: dict[str, Any] = {}  # the top-level fields, filled as the events stream by
    try:
        parsed = parse_events(stream_trace(path, trace), trace)
    except ValueError as exc:
        raise DiagError(f"{path}: not a readable trace JSON ({(str(exc).splitlines() or [''])[0][:120]})") from None
    return trace_to_run(path, trace, parsed)


def trace_to_run(path: str, trace: dict[str, Any], parsed: KinetoTables) -> Run:
    """The Run of a parsed trace; `trace` holds the top-level fields (deviceProperties, distributedInfo)."""
    pid = parsed.pid if parsed.pid is not None else -1
    for row in parsed.kernels:
        row["pid"] = pid
    tables = {"kernels": parsed.kernels, "steps": parsed.steps, "ranges": parsed.ranges}
    if not any(tables.values()):
        raise DiagError(f"{path}: no kernels, steps or annotations in this trace")
    start, end = span({"kernels": parsed.kernels} if parsed.kernels else tables)
    tables["windows"] = [{"window": 0, "ts_ns": start, "dur_ns": end - start, "steps": len(parsed.steps),
                          "profiler_start_ns": 0, "trace": os.path.basename(path), "pid": pid}]
    props = trace.get("deviceProperties")
    devices = [{"index": _int(d.get("id", i), i), "name": _str(d.get("name", "")),
                "memory_bytes": _int(d.get("totalGlobalMem", 0), 0)}
               for i, d in enumerate(props if isinstance(props, list) else []) if isinstance(d, dict)]
    gpu = {"count": len(devices), "devices": devices} if devices else {}
    run = trace_run(path, "kineto", "torch.profiler", tables, gpu)
    run.manifest["imported_from"]["skipped_rows"] = parsed.skipped
    if parsed.other_accelerator:
        run.manifest["imported_from"]["accelerator"] = parsed.other_accelerator
    dist = distributed_info(trace)
    if dist:
        run.manifest["distributed"] = dist
    return run


def distributed_info(trace: dict[str, Any]) -> dict[str, Any]:
    """{rank, world_size, backend} from a trace's `distributedInfo` (keys it lacks left out)."""
    info = trace.get("distributedInfo")
    if not isinstance(info, dict):
        return {}
    out: dict[str, Any] = {"source": "distributedInfo"}
    for key in ("rank", "world_size"):
        n = int64(info.get(key))
        if n is not None and n >= 0:
            out[key] = n
    if isinstance(info.get("backend"), str):
        out["backend"] = info["backend"][:80]
    return out if len(out) > 1 else {}
