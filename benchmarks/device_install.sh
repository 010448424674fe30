#!/usr/bin/env bash
# Install the wheels the GPU machine lacks, offline, into /tmp/site (run from the repo root there):
#   bash benchmarks/device_install.sh && export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
# .whl/    diag's own dependencies (../shared/tools/device-wheels .whl)
# .gpuwhl/ the optional `diag[cupti]` extra: cupti-python, cuda-bindings, cuda-pathfinder, pyelftools
# Name both in the device call's `carry`; neither is committed (.git/info/exclude).
set -euo pipefail
wheels=()
for d in .whl .gpuwhl; do
  [ -d "$d" ] && for w in "$d"/*.whl; do [ -e "$w" ] && wheels+=("$w"); done
done
[ ${#wheels[@]} -eq 0 ] && { echo "no wheels in .whl/ or .gpuwhl/"; exit 0; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "${wheels[@]}"
# cupti-python is optional: say whether the kernel windows will find it (they fall back to torch.profiler)
PYTHONPATH=/tmp/site python3 -c "from cupti import cupti; print('cupti-python importable, CUPTI clock', cupti.get_timestamp())" \
  || echo "cupti-python not importable: kernel windows use torch.profiler"
