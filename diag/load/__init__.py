"""`diag load`: an HTTP load generator whose figures are a diag run.

- `parse_load_args("URL --rate 50 --slo 'p99<200ms'")` -> LoadSpec (the words `diag load` takes)
- `run_load(spec, out=None, on_tick=None)` -> LoadResult (run_dir, result: the diag.load/1 object)

Modules: schedule (arrivals), client (the aiohttp loop), stats, slo, sweep, runner
(run directory), output (console and JSON).
"""

from diag.load.runner import LoadResult, run_load
from diag.load.spec import LoadSpec, parse_load_args

__all__ = ["LoadResult", "LoadSpec", "parse_load_args", "run_load"]
