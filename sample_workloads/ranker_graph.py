"""Online ranking, replayed: ranker_mlp's model with its step captured once as a CUDA graph.

The forward pass is captured with `torch.cuda.graph` into static input and
output buffers; each step copies the next (user, item) batch into the inputs,
replays the graph and reads the best score back. CUDA graphs need CUDA: on
the CPU the same step runs eagerly, and the program says so on stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from _common import Deadline, parse_args, summary, sync
from _ranker import add_size_flags, build


def graphed_step(model: torch.nn.Module, users: torch.Tensor, items: torch.Tensor) -> Callable[[int], torch.Tensor]:
    """Capture the forward once (after warm-up on a side stream, as torch.cuda.graph requires)."""
    static_user, static_item = users[0].clone(), items[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_user, static_item)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_user, static_item)

    def step(k: int) -> torch.Tensor:
        static_user.copy_(users[k])
        static_item.copy_(items[k])
        graph.replay()
        return static_out

    return step


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], extra=add_size_flags)
    model, users, items = build(args)
    with torch.inference_mode():
        if args.device == "cuda":
            step = graphed_step(model, users, items)
        else:
            print("ranker_graph: CUDA graphs need CUDA; running the same step eagerly on cpu", file=sys.stderr)

            def step(k: int) -> torch.Tensor:
                return model(users[k], items[k])

        deadline = Deadline(args.seconds)
        steps, best = 0, 0.0
        while not deadline.done():
            best = max(best, step(steps % 256).max().item())
            steps += 1
    sync(args.device)
    summary("ranker_graph", args.device, steps * args.batch, "candidates", deadline.elapsed(),
            f"best score {best:.3f}, width {args.width}, {args.blocks} blocks, batch {args.batch}")


if __name__ == "__main__":
    main()
