#!/usr/bin/env bash
# Profile every GPU-valid held-out workload on the GPU and check each verdict.
#   benchmarks/heldout/run_gpu.sh [OUTDIR] [SECONDS]     (run from the repository root)
# RUNS="name:device ..." overrides the list (e.g. RUNS="idle_poller:cpu" to try it on a CPU box).
# OUTDIR defaults to $OUT (the device machine's result folder), SECONDS to 12.
# Writes OUTDIR/<name>.json (diag analyze --json) and OUTDIR/<name>.log (the
# program's own output), prints one "OK/MISS name: expected X, got Y" line per
# workload and a final tally. Exit code 0 even on misses: the lines are the result.
set -uo pipefail
out=${1:-${OUT:?give OUTDIR or set OUT}}; secs=${2:-12}
py=${PYTHON:-python3}
mkdir -p "$out"
# name and --device: ort_wide_batch asks for the CUDA provider on a CPU-only onnxruntime build
runs=${RUNS:-"vit_bf16:cuda greedy_decode:cuda norm_gelu_stack:cuda record_loader:cuda pipe_frames:cuda
      pinned_stream:cuda burst_server:cuda ort_wide_batch:cuda multi_model_boot:cuda idle_poller:cuda"}
for r in $runs; do
  w=${r%%:*}; dev=${r##*:}
  run="$out/run_$w"
  rm -rf "$run"
  timeout 120 $py -m diag profile --out "$run" --quiet -- $py "benchmarks/heldout/$w.py" --device "$dev" --seconds "$secs" \
    > "$out/$w.log" 2>&1
  echo "exit code $?" >> "$out/$w.log"
  $py -m diag analyze "$run" --json > "$out/$w.json" 2>> "$out/$w.log" || echo "analyze failed" >> "$out/$w.log"
  rm -rf "$run/raw"
  $py - "$w" "$dev" "$out/$w.json" "$out/$w.log" <<'PY'
import json, sys
sys.path.insert(0, "benchmarks/heldout")
from expected import EXPECTED, verdict_ok
w, dev, path, log = sys.argv[1:]
want = EXPECTED[w][dev][0]
try:
    d = json.load(open(path))
except Exception as e:  # a broken run still gets its line
    tail = open(log).read().strip().splitlines()[-2:]
    print(f"MISS {w} ({dev}): expected {want}, got no diagnosis ({type(e).__name__}); log: {tail}")
    sys.exit(0)
top = sorted(d["scores"].items(), key=lambda kv: -kv[1])[:3]
ok = verdict_ok(w, dev, d["primary"], d["scores"])
rules = ",".join(sorted({f["rule"] for f in d["findings"] if f.get("label") and f["label"] != "(advice only)"}))
m = d.get("metrics", {})
keys = ("steady.gpu_busy", "steady.tensor_active", "steady.dram_bw_util", "steady.sm_active",
        "steady.inside_model_share", "steady.copy_share", "steady.queue_wait_ratio", "coldstart.share")
brief = " ".join(f"{k.replace('steady.', '')}={m[k]:.2f}" for k in keys if isinstance(m.get(k), (int, float)))
tag = "MISS" if not ok else ("OK~ " if want is None and d["primary"] else "OK  ")  # OK~: weak claim on an idle program
print(f"{tag} {w} ({dev}): expected {want}, got {d['primary']} | "
      + ", ".join(f"{k} {v:.2f}" for k, v in top) + f" | rules: {rules} | {brief}")
PY
done | tee "$out/summary.txt"
echo "held-out GPU: $(grep -c '^OK' "$out/summary.txt") OK, $(grep -c '^MISS' "$out/summary.txt") MISS" | tee -a "$out/summary.txt"
