"""Cases for the serving rules (rules/serving.toml), in test_rules_recommendations.py's CASES shape:
rule id, metrics that show the problem, the change that removes the evidence, text the fix must contain."""

from __future__ import annotations

from diag.analysis.metrics import BY_NAME


def metrics(**kw: float) -> dict[str, float | None]:
    """Every known metric None but those given (`steady__x` for `steady.x`): the input of evaluate_rule."""
    m: dict[str, float | None] = dict.fromkeys(BY_NAME)
    m.update({k.replace("__", "."): v for k, v in kw.items()})
    return m


CPU = {"run__gpu": 0.0, "steady__serving": 1.0, "steady__cpu_cores": 2.0, "steady__process_cpu_cores": 1.2}

SERVING_CASES = [
    ("serve.loop_saturated", dict(CPU, steady__loop_blocked_share=0.8, steady__loop_thread_demand=0.75,
                                  steady__loop_held_share=0.8),
     {"steady__loop_thread_demand": 0.05}, "ProcessPoolExecutor"),
    ("serve.blocking_call_in_async", dict(CPU, steady__loop_blocked_share=0.6, steady__loop_blocked_offcpu_share=0.5,
                                          steady__loop_thread_cpu=0.1),
     {"steady__loop_blocked_offcpu_share": 0.02}, "asyncio.to_thread"),
    ("serve.wait_before_handler", dict(CPU, steady__requests_found=200, steady__pre_handler_wait_share=0.7,
                                       steady__pre_handler_wait_p50_ms=900, steady__pre_handler_wait_mean_ms=950,
                                       steady__handler_p50_ms=400),
     {"steady__pre_handler_wait_share": 0.05}, "--workers"),
    ("serve.handler_blocked", dict(CPU, steady__requests_found=200, steady__handler_blocked_share=0.8),
     {"steady__handler_blocked_share": 0.1}, "gthread"),
    ("serve.model_thread_saturated", dict(CPU, steady__model_busy_share=0.95, steady__part_to_model_share=0.9,
                                          steady__batcher_seen=1, steady__batch_p50=4, steady__batch_max=16),
     {"steady__model_busy_share": 0.3}, "quantize_dynamic"),
    ("serve.batcher_starved", dict(CPU, steady__batcher_seen=1, steady__batch_max=16, steady__batch_p50=1,
                                   steady__loop_blocked_share=0.7, steady__loop_held_share=0.7),
     {"steady__loop_held_share": 0.1}, "Do not add a batcher"),
    ("serve.worker_imbalance", dict(CPU, steady__server_workers=2, steady__worker_request_imbalance=1.9),
     {"steady__worker_request_imbalance": 1.05}, "reuse-port"),
    ("serve.uncached_reads", dict(CPU, steady__request_read_bytes=16e6, steady__serving_disk_read_bps=3e8),
     {"steady__request_read_bytes": 2000}, "lru_cache"),
]
