#!/usr/bin/env bash
# Serving with and without speculative decoding, side by side (issue 55):
# interleaved rounds of `anymoe serve --parallel 16 --spec S` loaded by
# `anymoe bench-serve`, on random prompts (where drafts are mostly rejected)
# and on a repetitive prompt (a rewrite task, where they are accepted). One
# JSON report per run in OUT; tools/bench_summary.py-style medians are
# printed by the last step.
#
# Usage: tools/bench_spec_serve.sh OUT [ROUNDS] [SPECS]
#   BIN (build/src/anymoe), MODEL (SmolLM2 Q4_1), BASE_BIN (optional: a second
#   binary run with SPECS too, e.g. the build before a change).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/bench_spec_serve.sh OUT [ROUNDS] [SPECS]}
rounds=${2:-3}
specs=${3:-none ngram}
bin=${BIN:-build/src/anymoe}
model=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
mkdir -p "$out"
random_load=(--num-prompts 400 --qps inf --concurrency 24 --input-len 200 --output-len 48 --ignore-eos)
repeat_load=(--num-prompts 64 --qps inf --concurrency 4 --prompt-file bench/prompts/rewrite.txt
             --output-len 128)

# serve_and_load BIN SPEC NAME LOAD...: one server, one bench-serve run, $out/NAME.json.
serve_and_load() {
  local b=$1 spec=$2 name=$3
  shift 3
  "$b" serve -m "$model" -t 2 --parallel 16 --spec "$spec" --port 0 >"$out/$name.log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$out/$name.log")
    [[ -n $port ]] && grep -q "ready:" "$out/$name.log" && break
    sleep 0.2
  done
  "$b" bench-serve --url "http://127.0.0.1:$port" "$@" -o json >"$out/$name.json"
  kill -INT "$pid"
  wait "$pid" || true
}

for r in $(seq "$rounds"); do
  for s in $specs; do
    [[ -z ${BASE_BIN:-} ]] || serve_and_load "$BASE_BIN" "$s" "random-base-$s-$r" "${random_load[@]}"
    serve_and_load "$bin" "$s" "random-$s-$r" "${random_load[@]}"
  done
done
for r in $(seq "$rounds"); do
  for s in $specs; do serve_and_load "$bin" "$s" "repeat-$s-$r" "${repeat_load[@]}"; done
done

python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
groups = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(f)[:-5].rsplit("-", 1)[0]
    groups.setdefault(name, []).append(json.load(open(f)))
def cell(v):
    return "%.0f (%.0f-%.0f)" % (statistics.median(v), min(v), max(v))
print("| run | rounds | output tok/s | TTFT median ms | p90 | p99 | max | failed |")
print("|---|---|---|---|---|---|---|---|")
for name, ds in groups.items():
    t = lambda k: [d["ttft_ms"][k] for d in ds]
    print(f"| {name} | {len(ds)} | {cell([d['output_throughput'] for d in ds])} | "
          f"{cell(t('median'))} | {cell(t('p90'))} | {cell(t('p99'))} | {cell(t('max'))} | "
          f"{sum(d['failed'] for d in ds)} |")
PY
