#!/usr/bin/env bash
# Profile several programs in one device call and keep small runs (raw/ dropped).
#   benchmarks/profile_many.sh OUTDIR 'name|diag options|command ...' ...
# e.g. benchmarks/profile_many.sh "$OUT" 'ranker||python3 sample_workloads/ranker_mlp.py --device cuda --seconds 10'
# Writes OUTDIR/<name>/ (the run), <name>.json (diag analyze --json), <name>.log (the
# program's output and diag's summary) and prints one line per run: exit code, verdict,
# steps, kernel-window backend, first step.
set -uo pipefail
out=$1; shift
py=${PYTHON:-python3}
mkdir -p "$out"
for spec in "$@"; do
  IFS='|' read -r name opts cmd <<< "$spec"
  rm -rf "${out:?}/$name"
  # shellcheck disable=SC2086 # options and command are word lists on purpose
  timeout "${TIMEOUT:-240}" $py -m diag profile --out "$out/$name" $opts -- $cmd > "$out/$name.log" 2>&1
  rc=$?
  $py -m diag analyze "$out/$name" --json > "$out/$name.json" 2>> "$out/$name.log"
  $py - "$out/$name" "$rc" <<'PY'
import json, os, sys
run, rc = sys.argv[1], sys.argv[2]
name = os.path.basename(run)
try:
    d = json.load(open(run + ".json"))
    m = json.load(open(os.path.join(run, "run.json")))
except (OSError, ValueError) as exc:
    print(f"{name}: rc {rc}, no diagnosis ({exc})"); sys.exit()
top = sorted(d["scores"].items(), key=lambda kv: -kv[1])[:3]
k = m.get("collectors", {}).get("kernels", {})
mt = d.get("metrics", {})
print(f"{name}: rc {rc} | {d['primary']} | " + ", ".join(f"{a} {b:.2f}" for a, b in top)
      + f" | steps {mt.get('steady.steps')} | kernels {k.get('status')} {k.get('backend')} teardown={k.get('teardown')}"
      + f" windows={k.get('windows')} | first step {mt.get('startup.duration_s')} s")
PY
  rm -rf "${out:?}/$name/raw"
done
