"""`diag load`: an HTTP load generator whose figures are a diag run.

- `parse_load_args("URL --rate 50 --slo 'p99<200ms'")` -> LoadSpec (the words `diag load` takes)
- `run_load(spec, out=None, on_tick=None)` -> LoadResult (run_dir, result: the diag.load/1 object)

Modules: schedule (arrivals), client (the aiohttp loop), stats, slo, sweep, runner
(run directory), output (console and JSON).
"""

from typing import Any

__all__ = ["LoadResult", "LoadSpec", "parse_load_args", "run_load"]

# Loaded on first use: `diag --help` and the CLI parser import diag.load.spec
# (the load flags), and must not pull in aiohttp and pandas with the runner.
_HOMES = {"LoadResult": "runner", "run_load": "runner", "LoadSpec": "spec", "parse_load_args": "spec"}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"diag.load.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'diag.load' has no attribute {name!r}")
