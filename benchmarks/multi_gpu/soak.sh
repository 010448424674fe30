#!/usr/bin/env bash
# Soak: run the 2-rank program under `diag profile -- torchrun ...` N times in a row, all collectors on,
# and check every run finishes within a time bound (issue 17: diag must never hang a distributed job).
#
#   benchmarks/multi_gpu/soak.sh [N] [BOUND_S] [-- extra tp_linear.py args]
#   GPU (nvidia-h200-x2):  benchmarks/multi_gpu/soak.sh 20 120 -- --kind comm --seconds 6
#   CPU stand-in:          benchmarks/multi_gpu/soak.sh 5 90 -- --device cpu --seconds 1
#
# Env: NPROC (ranks, default 2), PY (default .venv/bin/python), OUT (run directories, default a temp dir),
#      DIAG_SOAK_OPTS (extra diag profile options). Prints one line per run (pass/FAIL, seconds, exit code)
#      and a summary; exits 1 if any run failed or ran past BOUND_S (then killed: its process group).
set -u
N=${1:-20}
BOUND=${2:-120}
shift $(( $# >= 2 ? 2 : $# ))
[ "${1:-}" = "--" ] && shift
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--kind comm --seconds 6)
NPROC=${NPROC:-2}
PY=${PY:-.venv/bin/python}
BIN=$(dirname "$PY")
OUT=${OUT:-$(mktemp -d /tmp/diag-soak.XXXXXX)}
mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
fails=0
durations=()
for i in $(seq 1 "$N"); do
  run="$OUT/run$i"
  t0=$(date +%s.%N)
  # setsid: a run past the bound is killed with everything it started (diag, torchrun, ranks, py-spy)
  setsid timeout -k 10 "$BOUND" "$BIN/diag" profile --out "$run" --quiet ${DIAG_SOAK_OPTS:-} -- \
    "$BIN/torchrun" --nproc-per-node "$NPROC" "$HERE/tp_linear.py" "${ARGS[@]}" >"$OUT/run$i.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  dur=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  durations+=("$dur")
  if [ $rc -eq 0 ] && [ -f "$run/run.json" ] && grep -q '"partial": false' "$run/run.json"; then
    echo "run $i: pass ${dur}s"
  else
    fails=$((fails + 1))
    why="exit $rc"; [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="HUNG: killed after ${BOUND}s"
    echo "run $i: FAIL ${dur}s ($why; log $OUT/run$i.log)"
  fi
done
echo "soak: $((N - fails))/$N passed; durations ${durations[*]} s; runs in $OUT"
[ $fails -eq 0 ]
