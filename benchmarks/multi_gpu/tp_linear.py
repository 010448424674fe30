"""Tensor-parallel style inference under torchrun: each layer's activations are all-reduced.

    torchrun --nproc-per-node 2 benchmarks/multi_gpu/tp_linear.py --kind comm|compute --seconds 6

`comm`: 8 bf16 Linear(1024) layers on a 4096-token batch, each followed by an
all_reduce of its activations (large activations, little math): communication-bound.
`compute`: 8 bf16 Linear(8192) layers on 256 tokens, one small all_reduce per step:
compute-bound. Rank 0 decides when time is up and tells the others every 20 steps,
so every rank runs the same number of steps. Rank 0 prints one summary line.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

SHAPES = {"comm": (4096, 1024, True), "compute": (256, 8192, False)}


class Layers(torch.nn.Module):
    def __init__(self, width: int, reduce_each: bool) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width, bias=False) for _ in range(8))
        self.reduce_each = reduce_each

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
            if self.reduce_each:
                dist.all_reduce(x)
        if not self.reduce_each:
            dist.all_reduce(x[:1])
        return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=sorted(SHAPES), default="comm")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: gloo and float32, 16x smaller shapes (a CPU box's stand-in for the GPU job)")
    args = ap.parse_args()
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    tokens, width, reduce_each = SHAPES[args.kind]
    if args.device == "cuda":
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        dtype = torch.bfloat16
    else:
        dist.init_process_group("gloo")
        tokens, width, dtype = tokens // 16, width // 4, torch.float32
    model = Layers(width, reduce_each).to(device=args.device, dtype=dtype).eval()
    x = torch.randn(tokens, width, device=args.device, dtype=dtype) * 0.01
    stop = torch.zeros(1, device=args.device)
    steps, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        for _ in range(10):  # warm-up
            model(x)
        if args.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        while True:
            model(x)
            steps += 1
            if steps % 20 == 0:
                stop.fill_(1.0 if rank == 0 and time.perf_counter() - t0 >= args.seconds else 0.0)
                dist.broadcast(stop, src=0)
                if stop.item():
                    break
    if args.device == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    if rank == 0:
        world = dist.get_world_size()
        print(f"tp_linear[{args.kind}] world {world}: {steps} steps in {elapsed:.2f} s "
              f"= {steps / elapsed:.1f} steps/s on {args.device}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
