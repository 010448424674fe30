"""Every recommendation of issue 3 (item 4) fires on its evidence, and not without it."""

from __future__ import annotations

import pytest
from serving_rule_cases import SERVING_CASES
from trace_rule_cases import TRACE_CASES

from diag.analysis.metrics import BY_NAME
from diag.engine.diagnose import evaluate_rule
from diag.engine.rules import load_rules

RULES = {r.id: r for r in load_rules()}


def metrics(**kw: float) -> dict[str, float | None]:
    m: dict[str, float | None] = {name: None for name in BY_NAME}
    for k, v in kw.items():
        name = k.replace("__", ".")
        assert name in BY_NAME, name
        m[name] = v
    return m


GPU = {"run__gpu": 1.0}
CPU = {"run__gpu": 0.0}

# rule id, metrics that show the problem, the change that removes the evidence, text the fix must contain
CASES = [
    ("transfer.copies_dominate", dict(GPU, steady__copy_share=0.5, steady__copy_pageable_fraction=0.9,
                                      steady__copy_bytes_per_step=6e7, steady__gpu_busy=0.3),
     {"steady__copy_share": 0.05}, "pinned"),
    ("transfer.pageable_copies", dict(GPU, steady__copy_share=0.1, steady__copy_pageable_fraction=0.9),
     {"steady__copy_pageable_fraction": 0.1}, "non_blocking=True"),
    ("transfer.memcpy_in_windows", dict(GPU, steady__memcpy_exposed_share=0.5, steady__memcpy_window_share=0.5, steady__gpu_busy_kernels=0.3,
                                        steady__memcpy_pageable_fraction=1.0),
     {"steady__memcpy_exposed_share": 0.05}, "pin"),
    ("queue.requests_wait", dict(GPU, steady__requests=500, steady__queue_wait_ratio=2.5, steady__batch_p50=1,
                                 steady__gpu_busy=0.3, steady__queue_wait_share=0.7, steady__request_concurrency=3,
                                 steady__queue_behind_model_share=0.9),
     {"steady__queue_wait_ratio": 0.3}, "max_queue_delay_microseconds"),
    ("queue.small_batches_idle_gpu", dict(GPU, steady__batch_p50=1, steady__gpu_busy=0.2,
                                          steady__request_concurrency=4),
     {"steady__batch_p50": 32}, "dynamic_batching"),
    ("cpu.host_work_starves_gpu", dict(GPU, steady__outside_busy_share=0.7, steady__gpu_busy=0.2),
     {"steady__outside_busy_share": 0.05}, "num_workers"),
    ("cpu.host_work_outside_model", dict(CPU, steady__outside_busy_share=0.7, steady__inside_model_share=0.25),
     {"steady__outside_busy_share": 0.1}, "num_workers"),
    ("cpu.input_workers_busy", dict(GPU, steady__outside_wait_share=0.7, steady__worker_cpu_cores=4,
                                    steady__gpu_busy=0.2, steady__cpu_cores=16, steady__process_cpu_cores=5),
     {"steady__worker_cpu_cores": 0.05}, "prefetch_factor"),
    ("io.stepping_thread_reads", dict(CPU, steady__io_wait_share=0.6), {"steady__io_wait_share": 0.02},
     "prefetch_factor"),
    ("io.block_iowait", dict(CPU, steady__outside_wait_share=0.6, steady__iowait_share=0.5, steady__disk_read_bps=2e8),
     {"steady__iowait_share": 0.0}, "num_workers"),
    ("io.workers_reading", dict(CPU, steady__outside_wait_share=0.6, steady__worker_io_share=0.8),
     {"steady__worker_io_share": 0.05}, "num_workers"),
    ("io.blocked_outside_model", dict(CPU, steady__blocked_outside_share=0.6, steady__outside_wait_share=0.6,
                                      steady__step_thread_cpu=0.3),
     {"steady__blocked_outside_share": 0.05}, "ThreadPoolExecutor"),
    ("compute.gpu_underfilled", dict(GPU, steady__gpu_busy=0.95, steady__sm_active=0.2, steady__batch_p50=1),
     {"steady__sm_active": 0.9}, "larger batches"),
    ("launch.tiny_kernels", dict(GPU, steady__kernel_mean_us=5, steady__kernel_idle_share=0.7,
                                 steady__inside_model_share=0.9, steady__kernels_per_step=300,
                                 steady__gpu_busy_kernels=0.3),
     {"steady__kernel_mean_us": 200}, 'mode="reduce-overhead"'),
    ("launch.gpu_idle_cpu_in_model", dict(GPU, steady__gpu_util=0.2, steady__inside_model_share=0.9,
                                          steady__step_thread_cpu=0.95),
     {"steady__gpu_util": 0.9}, "reduce-overhead"),
    ("compute.gpu_math", dict(GPU, steady__gpu_busy=0.95, steady__math_active=0.6, steady__fp32_active=0.6,
                              steady__tensor_active=0.0, steady__dram_bw_util=0.2, steady__fp32_step_fraction=1),
     {"steady__gpu_busy": 0.2}, "allow_tf32"),
    ("compute.cpu_model_time", dict(CPU, steady__inside_model_share=0.95, steady__fp32_step_fraction=1.0,
                                    steady__process_cpu_cores=4, steady__cpu_cores=16),
     {"steady__inside_model_share": 0.2}, "quantize_dynamic"),
    ("memory.dram_bandwidth", dict(GPU, steady__gpu_busy=0.95, steady__dram_bw_util=0.85, steady__math_active=0.1),
     {"steady__dram_bw_util": 0.2}, "torch.compile"),
    ("memory.elementwise_kernels", dict(GPU, steady__gpu_busy=0.9, steady__kernel_elementwise_share=0.8,
                                        steady__kernel_mean_us=40, steady__kernel_elementwise_wmean_us=40),
     {"steady__kernel_elementwise_share": 0.1}, "torch.compile"),
    ("cold.startup_dominates", dict(GPU, coldstart__share=0.6, coldstart__excess_s=30, startup__model_load_s=20,
                                    startup__first_step_s=5, warmup__excess_s=3, run__duration_s=60),
     {"coldstart__share": 0.05}, "pre-warm"),
    ("sync.in_hot_path", dict(GPU, steady__syncs_in_step_per_step=3, steady__syncs_per_step=4,
                              steady__sync_share=0.3, steady__gpu_busy=0.4),
     {"steady__syncs_in_step_per_step": 0, "steady__syncs_per_step": 1}, ".item()"),
    ("ort.cuda_provider_fallback", dict(CPU, ort__provider_fallback=1, ort__sessions=1),
     {"ort__provider_fallback": 0}, "onnxruntime-gpu"),
    ("compute.cudnn_benchmark", dict(GPU, steady__gpu_busy=0.9, steady__distinct_shapes=1, steady__kernel_conv_share=0.6),
     {"steady__distinct_shapes": 40}, "cudnn.benchmark = True"),
    ("gpu.memory_near_limit", dict(GPU, steady__gpu_mem_used_ratio=0.97, steady__gpu_mem_used_bytes=137e9),
     {"steady__gpu_mem_used_ratio": 0.5}, "expandable_segments"),
    ("gpu.throttling", dict(GPU, steady__throttle_share=0.8, steady__thermal_throttle_share=0.8,
                            steady__power_throttle_share=0.0, steady__gpu_busy=0.9, steady__sm_clock_ratio=0.7),
     {"steady__throttle_share": 0.0}, "cooling"),
    ("gc.pauses_in_tail", dict(CPU, steady__gc_tail_overlap=0.9, steady__step_p99_ms=40, steady__step_p50_ms=10,
                               steady__step_p90_ms=11, steady__gc_pause_max_ms=30),
     {"steady__gc_tail_overlap": 0.0}, "gc.freeze()"),
    ("device.gpu_unused", dict(CPU, run__gpu_available=1.0, steady__inside_model_share=0.9, ort__provider_fallback=0),
     {"run__gpu_available": 0.0}, '.to(device)'),
    ("io.workers_blocked", dict(GPU, steady__outside_wait_share=0.7, steady__worker_blocked_share=0.9,
                                steady__gpu_busy=0.1),
     {"steady__worker_blocked_share": 0.1}, "num_workers=16"),
    ("cpu.oversubscribed", dict(CPU, steady__step_thread_runq_share=0.35, steady__process_cpu_cores=15,
                                steady__cpu_cores=16, steady__system_cpu_share=1.0),
     {"steady__step_thread_runq_share": 0.02}, "set_num_threads"),
    ("memory.low_intensity_kernels", dict(GPU, steady__gpu_busy=0.8, steady__kernel_elementwise_share=1.0,
                                          steady__math_active=0.01, steady__dram_bw_util=0.2),
     {"steady__kernel_elementwise_share": 0.1}, "torch.compile"),
    ("gc.pause_share", dict(CPU, steady__gc_share=0.15, steady__gc_pause_max_ms=50),
     {"steady__gc_share": 0.001}, "gc.freeze()"),
    ("graphs.host_between_replays", dict(GPU, run__cuda_graphs=1, steady__outside_model_share=0.6, steady__gpu_busy=0.3,
                                         steady__cuda_graph_steps_share=1.0, steady__syncs_per_step=1),
     {"run__cuda_graphs": 0}, "non_blocking=True"),
    ("graphs.small_work_per_replay", dict(GPU, run__cuda_graphs=1, steady__cuda_graph_steps_share=1.0, steady__batch_p50=1,
                                          steady__kernel_mean_us=2, steady__sm_active=0.1),
     {"steady__batch_p50": 64}, "torch.cuda.graph(g)"),
    ("graphs.compiled_call_overhead", dict(GPU, run__compiled=1, run__cuda_graphs=1, steady__inside_model_share=0.9,
                                           steady__gpu_busy_kernels=0.2, steady__step_mean_ms=0.1),
     {"run__compiled": 0}, "skip_guard_eval_unsafe"),
    ("graphs.recompiles", dict(GPU, run__compiled=1, run__recompiles=8, coldstart__compile_s=30, run__duration_s=100),
     {"run__recompiles": 0}, "mark_dynamic"),
    ("graphs.graph_breaks", dict(GPU, run__compiled=1, run__graph_breaks=3), {"run__graph_breaks": 0}, "fullgraph=True"),
    # diag profile --load: the client waits before the handler runs, longer than the handler takes
    ("load.wait_before_handler", dict(CPU, load__requests=600, load__matched_share=0.95, load__pre_handler_ratio=8.0,
                                      load__pre_handler_share=0.85, load__pre_handler_p50_ms=900.0,
                                      load__pre_handler_p99_ms=1500.0, load__handler_p50_ms=50.0,
                                      load__client_p99_ms=1660.0, load__server_p99_ms=61.0, load__gap_p99_ms=1600.0,
                                      load__offered_per_s=30.0, load__achieved_per_s=20.0),
     {"load__pre_handler_share": 0.1}, "--limit-concurrency"),
    ("host.cpu_contention", dict(CPU, steady__step_thread_runq_share=0.4, steady__other_cpu_cores=1.5,
                                 steady__cpu_cores=2, steady__process_cpu_cores=1, steady__system_cpu_share=1.0),
     {"steady__other_cpu_cores": 0.1}, "taskset"),
]


def test_every_builtin_rule_has_a_case():
    assert {c[0] for c in CASES + SERVING_CASES + TRACE_CASES} | {"compute.gpu_matmul_kernels", "compute.gpu_busy",
                                    "compute.gpu_model_time_no_gpu_data", "memory.nvml_memory_util",
                                    "fallback.model_time", "fallback.outside_work", "fallback.outside_wait"} == set(RULES)


@pytest.mark.parametrize("rule_id, evidence, without, snippet", CASES + SERVING_CASES + TRACE_CASES,
                         ids=[c[0] for c in CASES + SERVING_CASES + TRACE_CASES])
def test_recommendation_fires_on_its_evidence_only(rule_id, evidence, without, snippet):
    rule = RULES[rule_id]
    f = evaluate_rule(rule, metrics(**evidence))
    assert f is not None, f"{rule_id} did not fire on its evidence"
    text = " ".join(r.text + " " + r.code for r in f.recommendations)
    assert snippet in text
    assert all("n/a" not in r.text for r in f.recommendations), [r.text for r in f.recommendations]
    assert evaluate_rule(rule, metrics(**{**evidence, **without})) is None
    # no evidence at all: never fires
    assert evaluate_rule(rule, metrics()) is None


def test_gains_are_upper_bounds_from_measured_shares():
    f = evaluate_rule(RULES["transfer.copies_dominate"], metrics(**CASES[0][1]))
    assert f.recommendations[0].expected_gain.startswith("at most 2.00x")  # 1 / (1 - 0.5)
    f = evaluate_rule(RULES["launch.tiny_kernels"], metrics(**CASES[13][1]))
    assert "at most 3.3x" in f.recommendations[0].expected_gain  # 1 / (1 - 0.7)


def test_pinned_memory_advice_needs_pageable_copies():
    m = dict(CASES[0][1], steady__copy_pageable_fraction=0.0)
    f = evaluate_rule(RULES["transfer.copies_dominate"], metrics(**m))
    assert f is not None and not any("pinned" in r.text for r in f.recommendations)


def test_dynamic_batching_only_for_small_batches():
    m = dict(CASES[3][1], steady__batch_p50=64)
    f = evaluate_rule(RULES["queue.requests_wait"], metrics(**m))
    assert f is not None and not any("max_queue_delay_microseconds" in r.code for r in f.recommendations)


def test_reduced_precision_only_for_fp32_math():
    m = dict(CASES[15][1], steady__fp32_active=0.02, steady__tensor_active=0.6, steady__fp32_step_fraction=0.0)
    f = evaluate_rule(RULES["compute.gpu_math"], metrics(**m))
    assert f is not None and not any("allow_tf32" in r.code for r in f.recommendations)


def test_int8_advice_only_for_fp32_models():
    m = dict(CASES[16][1], steady__fp32_step_fraction=0.0)
    f = evaluate_rule(RULES["compute.cpu_model_time"], metrics(**m))
    assert f is not None and not any("quantize_dynamic" in r.code for r in f.recommendations)


def test_throttling_advice_matches_the_reason():
    power = dict(CASES[24][1], steady__thermal_throttle_share=0.0, steady__power_throttle_share=0.8)
    f = evaluate_rule(RULES["gpu.throttling"], metrics(**power))
    text = " ".join(r.text for r in f.recommendations)
    assert "Power cap" in text and "cooling" not in text


def test_fallback_gpu_rules_fire_only_without_better_data():
    busy = dict(GPU, steady__gpu_busy=0.95, steady__gpu_mem_util=0.3)
    assert evaluate_rule(RULES["compute.gpu_busy"], metrics(**busy)) is not None
    assert evaluate_rule(RULES["compute.gpu_busy"], metrics(**busy, steady__dram_bw_util=0.2)) is None
    mem = dict(GPU, steady__gpu_busy=0.95, steady__gpu_mem_util=0.9)
    assert evaluate_rule(RULES["memory.nvml_memory_util"], metrics(**mem)) is not None
    kern = dict(GPU, steady__gpu_busy=0.9, steady__kernel_matmul_share=0.9, steady__kernel_elementwise_share=0.1,
                steady__kernel_mean_us=80)
    assert evaluate_rule(RULES["compute.gpu_matmul_kernels"], metrics(**kern)) is not None
    nodata = dict(GPU, steady__inside_model_share=0.9, steady__step_thread_cpu=0.9)
    assert evaluate_rule(RULES["compute.gpu_model_time_no_gpu_data"], metrics(**nodata)) is not None
    assert evaluate_rule(RULES["compute.gpu_model_time_no_gpu_data"], metrics(**nodata, steady__gpu_busy=0.5)) is None


def test_fallbacks_never_outrank_a_specific_rule():
    for rid in ("fallback.model_time", "fallback.outside_work", "fallback.outside_wait"):
        f = evaluate_rule(RULES[rid], metrics(steady__inside_model_share=1.0, steady__outside_busy_share=1.0,
                                              steady__outside_wait_share=1.0))
        assert f is not None and f.score <= 0.3
