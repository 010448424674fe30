"""Cases for the communication and trace rules (tests/test_rules_recommendations.py runs them):
rule id, metrics that show the problem, the change that removes the evidence, text the fix must contain."""

from __future__ import annotations

GPU = {"run__gpu": 1.0}

TRACE_CASES = [
    ("communication.exposed", dict(GPU, steady__comm_kernel_share=0.7, steady__comm_exposed_share=0.6,
                                   steady__comm_exposed_transfer_share=0.5, steady__comm_overlap_fraction=0.1,
                                   steady__comm_kernels_per_step=40, run__world_size=8),
     {"steady__comm_exposed_share": 0.02}, "async_op=True"),
    # the same exposed communication, but the collectives wait for a peer: not the links' cost
    ("communication.peer_wait", dict(GPU, steady__comm_exposed_wait_share=0.3, steady__comm_wait_fraction=0.95,
                                     steady__comm_exposed_transfer_share=0.01, run__world_size=2),
     {"steady__comm_wait_fraction": 0.2}, "slowest rank"),
    ("trace.gpu_waits_for_host", dict(GPU, steady__gpu_host_wait_share=0.7, steady__launch_delay_p50_us=12,
                                      steady__kernel_mean_us=60, steady__input_share=0.4),
     {"steady__gpu_host_wait_share": 0.05}, "num_workers"),
]
