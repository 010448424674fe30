#!/usr/bin/env bash
# One device call: profile sample workloads on the GPU and keep the runs.
#   benchmarks/gpu_session.sh OUTDIR SECONDS WORKLOAD...
# Writes OUTDIR/<workload>/ (run directories, raw/ dropped to keep them small),
# OUTDIR/<workload>.json (diag analyze --json) and prints each verdict.
set -uo pipefail
out=$1; secs=$2; shift 2
mkdir -p "$out"
for w in "$@"; do
  echo "=== $w"
  python3 -m diag profile --out "$out/$w" --quiet -- python3 "sample_workloads/$w.py" --device cuda --seconds "$secs"
  echo "exit code $?"
  python3 -m diag analyze "$out/$w" --json > "$out/$w.json" || echo "analyze failed"
  python3 - "$out/$w.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
top = sorted(d["scores"].items(), key=lambda kv: -kv[1])[:3]
print("primary:", d["primary"], "| scores:", ", ".join(f"{k} {v:.2f}" for k, v in top))
print("collectors:", {k: v.get("status") for k, v in d["run"].get("collectors", {}).items()} if "collectors" in d["run"] else "")
PY
  python3 - "$out/$w" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/run.json"))
print({k: (v.get("status"), v.get("reason", "")[:80], v.get("cpu_s")) for k, v in m["collectors"].items()})
PY
  rm -rf "$out/$w/raw"
done
