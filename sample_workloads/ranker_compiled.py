"""Online ranking, compiled: ranker_mlp's model under torch.compile.

`--mode reduce-overhead` (the default) lets inductor replay the step as CUDA
graphs; `--mode default` compiles without them. Three warm-up calls compile
before the timed loop. On the CPU the model is compiled with dynamo's `eager`
backend (no C++ toolchain or minutes of inductor compile needed), and the
program says so on stderr.
"""

from __future__ import annotations

import argparse
import sys

import torch
from _common import Deadline, parse_args, summary, sync
from _ranker import add_size_flags, build


def flags(parser: argparse.ArgumentParser) -> None:
    add_size_flags(parser)
    parser.add_argument("--mode", choices=["reduce-overhead", "default"], default="reduce-overhead",
                        help="torch.compile mode on CUDA")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], extra=flags)
    model, users, items = build(args)
    if args.device == "cuda":
        compiled = torch.compile(model, mode=args.mode)
    else:
        print("ranker_compiled: on cpu, compiled with backend='eager' (CUDA graphs need CUDA)", file=sys.stderr)
        compiled = torch.compile(model, backend="eager")
    with torch.inference_mode():
        for k in range(3):  # compile (and record the graphs) before the timed loop
            compiled(users[k], items[k])
        sync(args.device)
        deadline = Deadline(args.seconds)
        steps, best = 0, 0.0
        while not deadline.done():
            best = max(best, compiled(users[steps % 256], items[steps % 256]).max().item())
            steps += 1
    sync(args.device)
    summary("ranker_compiled", args.device, steps * args.batch, "candidates", deadline.elapsed(),
            f"best score {best:.3f}, mode {args.mode if args.device == 'cuda' else 'eager backend'}, "
            f"width {args.width}, {args.blocks} blocks, batch {args.batch}")


if __name__ == "__main__":
    main()
