#!/usr/bin/env bash
# Runs `anymoe bench` and llama-bench interleaved (round by round, file by
# file, rotating which engine goes first) on the same GGUF files with the
# same settings, writing one JSON per run (ENGINE@FILE-rROUND.json);
# tools/bench_summary.py turns the directory into the tables of
# docs/benchmarks.md.
#   tools/bench_side_by_side.sh OUT_DIR LLAMA_BENCH ROUNDS THREADS FILE...
# llama-bench comes from a llama.cpp built outside this repository. On a shared
# machine, RUN_PREFIX="chrt -f 10" runs both engines at real-time priority so
# that other processes cannot preempt either (needs root).
# ANYMOE_TARGETS="avx2 avx2-vnni" runs anymoe once per CPU kernel target
# (--cpu-target; JSON files anymoe_<target>@...), each in the same rotation;
# ANYMOE_ARGS adds flags to every anymoe run (e.g. --membw for the roofline).
# TESTS replaces the tests of every engine (default "-p 128 -n 64"; e.g.
# TESTS="-p 512 -n 0" for prefill alone, "-p 512 -n 32 -d 4096,8192" at depth).
# IK_BENCH=PATH adds ik_llama.cpp's
# llama-bench (built outside this repository) as engine "ik", run with its
# run-time repacking (-rtr 1), as its users run it on CPUs.
set -euo pipefail
out=$1 llama_bench=$2 rounds=$3 threads=$4
shift 4
anymoe=${ANYMOE:-build/src/anymoe}
mkdir -p "$out"
prefix=${RUN_PREFIX:-}
read -r -a extra <<< "${ANYMOE_ARGS:-}"
read -r -a tests <<< "${TESTS:--p 128 -n 64}"
run_engine() {  # ENGINE FILE JSON; ENGINE: llama, ik, anymoe or anymoe_<target>
  case $1 in
    llama) $prefix "$llama_bench" -m "$2" "${tests[@]}" -t "$threads" -r 5 -o json 2>/dev/null > "$3" ;;
    ik) $prefix "$IK_BENCH" -m "$2" "${tests[@]}" -t "$threads" -r 5 -rtr 1 -o json 2>/dev/null > "$3" ;;
    anymoe) $prefix "$anymoe" bench -m "$2" "${tests[@]}" -t "$threads" -r 5 -o json "${extra[@]}" > "$3" ;;
    anymoe_*) $prefix "$anymoe" bench -m "$2" "${tests[@]}" -t "$threads" -r 5 -o json \
                --cpu-target "${1#anymoe_}" "${extra[@]}" > "$3" ;;
  esac
}
engines=(llama)
if [[ -n "${IK_BENCH:-}" ]]; then engines+=(ik); fi
if [[ -n "${ANYMOE_TARGETS:-}" ]]; then
  for t in $ANYMOE_TARGETS; do engines+=("anymoe_$t"); done
else
  engines+=(anymoe)
fi
for round in $(seq 1 "$rounds"); do
  for f in "$@"; do
    name=$(basename "$f" .gguf)
    # CPU time the rest of the machine used during the runs (from /proc/stat).
    before=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    n=${#engines[@]}
    for i in $(seq 0 $((n - 1))); do
      e=${engines[$(((i + round - 1) % n))]}
      run_engine "$e" "$f" "$out/$e@$name-r$round.json"
    done
    after=$(awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat)
    echo "round $round $name busy_ticks=$((after - before)) load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/log.txt"
  done
done
