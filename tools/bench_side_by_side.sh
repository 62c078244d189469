#!/usr/bin/env bash
# Runs `anymoe bench` and llama-bench interleaved (round by round, file by
# file, alternating which engine goes first) on the same GGUF files with the
# same settings, writing one JSON per run; tools/bench_summary.py turns the
# directory into the tables of docs/benchmarks.md.
#   tools/bench_side_by_side.sh OUT_DIR LLAMA_BENCH ROUNDS THREADS FILE...
# llama-bench comes from a llama.cpp built outside this repository. On a shared
# machine, RUN_PREFIX="chrt -f 10" runs both engines at real-time priority so
# that other processes cannot preempt either (needs root).
set -euo pipefail
out=$1 llama_bench=$2 rounds=$3 threads=$4
shift 4
anymoe=${ANYMOE:-build/src/anymoe}
mkdir -p "$out"
prefix=${RUN_PREFIX:-}
run_anymoe() { $prefix "$anymoe" bench -m "$1" -p 128 -n 64 -t "$threads" -r 5 -o json > "$2"; }
run_llama() { $prefix "$llama_bench" -m "$1" -p 128 -n 64 -t "$threads" -r 5 -o json 2>/dev/null > "$2"; }
for round in $(seq 1 "$rounds"); do
  for f in "$@"; do
    name=$(basename "$f" .gguf)
    # CPU time the rest of the machine used during the pair (from /proc/stat).
    before=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    if (( round % 2 )); then
      run_anymoe "$f" "$out/anymoe-$name-r$round.json"; run_llama "$f" "$out/llama-$name-r$round.json"
    else
      run_llama "$f" "$out/llama-$name-r$round.json"; run_anymoe "$f" "$out/anymoe-$name-r$round.json"
    fi
    after=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    echo "round $round $name busy_ticks=$((after - before)) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/log.txt"
  done
done
