#!/usr/bin/env bash
# Runs each libFuzzer target of tests/fuzz for a given time.
#   scripts/run-fuzz.sh BUILD_DIR SECONDS [TARGET...]
# New inputs go to BUILD_DIR/corpus/<target> (the committed seeds in
# tests/fuzz/corpus/<target> are read, never written); crashes, leaks, timeouts
# and over-limit mallocs are written to BUILD_DIR/artifacts/ and fail the run.
# A timeout is an input over 1 s of CPU time, checked by each target
# (CpuBudget in tests/fuzz/fuzz_input.h); -timeout (wall clock) only catches
# hangs (FUZZ_HANG_SECONDS, default 300), since a shared machine can stall any
# input for a long time (under SCHED_IDLE next to builds, 30 s was not enough).
# FUZZ_JOBS=N runs N targets at once (default 1).
# FUZZ_CPU_SECONDS=N stops each target (SIGINT, libFuzzer's clean exit with its
# final stats) once it has had N s of CPU time, however long that takes; then
# SECONDS is only an upper bound on the wall time. On a shared or oversubscribed
# machine this is what "each target N minutes" means.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 seconds=$2
shift 2
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(gguf safetensors hf_config tokenizer tokenizer_json tiktoken chat_template request jinja gbnf)
jobs=${FUZZ_JOBS:-1}
mkdir -p "$build/artifacts" "$build/logs"

run_one() {
  local t=$1
  mkdir -p "$build/corpus/$t"
  rm -f "$build/logs/$t.cpu"
  # Limits from reliability.md A1: allocations over 256 MiB, RSS over 2 GiB and
  # inputs over 1 s of CPU time (CpuBudget) are all failures.
  # /usr/bin/time: the CPU time each target really got (on a shared machine
  # it is less than the wall time libFuzzer counts).
  /usr/bin/time -o "$build/logs/$t.time" -f '%e s wall, %U s user + %S s sys CPU, %M KiB peak RSS' \
    "$build/fuzz_$t" "$build/corpus/$t" "tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout="${FUZZ_HANG_SECONDS:-300}" \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    >"$build/logs/$t.log" 2>&1 &
  local timer=$! rc=0
  [[ -z ${FUZZ_CPU_SECONDS:-} ]] || stop_at_cpu_seconds "$timer" "$FUZZ_CPU_SECONDS" "$build/logs/$t.cpu" &
  wait "$timer" || rc=$?
  # 72 is libFuzzer's exit code after SIGINT (-interrupt_exit_code): the CPU cap.
  if [[ $rc -eq 0 || ($rc -eq 72 && -f "$build/logs/$t.cpu") ]]; then
    local limit="${seconds} s"
    [[ ! -f "$build/logs/$t.cpu" ]] || limit="$(cat "$build/logs/$t.cpu") s of CPU"
    echo "fuzz $t: $(grep -E '^stat::number_of_executed_units' "$build/logs/$t.log" | awk '{print $2}') runs in $limit ($(grep -v '^Command exited' "$build/logs/$t.time")), no crash; $(grep -E '^#[0-9]+.*(DONE|pulse)' "$build/logs/$t.log" | tail -1)"
  else
    echo "fuzz $t: FAILED, see $build/logs/$t.log and $build/artifacts/"
    tail -n 30 "$build/logs/$t.log"
    return 1
  fi
}

# Polls the fuzzer under /usr/bin/time (pid $1) and sends it SIGINT once its
# user + system CPU time reaches $2 seconds; writes the CPU seconds it stopped at
# to $3.
stop_at_cpu_seconds() {
  local timer=$1 cap=$2 out=$3 pid="" ticks hz
  hz=$(getconf CLK_TCK)
  while kill -0 "$timer" 2>/dev/null; do
    [[ -n $pid ]] || pid=$(pgrep -P "$timer" | head -n 1 || true)
    if [[ -n $pid && -r /proc/$pid/stat ]]; then
      # Fields 14 and 15 (utime, stime) after the ")" that ends the command name.
      ticks=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')
      if ((ticks >= cap * hz)); then
        echo "$((ticks / hz))" >"$out"
        kill -INT "$pid"
        return
      fi
    fi
    sleep 5
  done
}

status=0
pids=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  if [[ ${#pids[@]} -ge $jobs ]]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
