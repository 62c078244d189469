#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU (sm_80 or newer),
# the CUDA toolkit, CMake and Ninja, and no network: builds with CUDA, prints
# `anymoe doctor`, runs every CUDA test of the conformance suite (every golden
# model on cuda against the CPU backend, op-level tests, fallback and
# device-memory tests), each in its own process so that one kernel fault
# cannot hide the others' results, expert parallelism on 2 ranks (where the
# build found MPI), then `anymoe bench` on SmolLM2 and on the
# MoE bench file, `anymoe serve` under `anymoe bench-serve`, and an `ncu`
# breakdown of one 8-sequence decode step (tools/ncu_step_summary.py). $OUT (default ./gpu-check-out) gets at most 7 files, as the
# device tool returns at most 8: summary.txt (every step's exit code and time,
# the test results, the bench tables and decode roofline), conformance.txt,
# doctor.txt, the bench JSONs, and logs.tar.gz with every log.
#
#   OUT=/tmp/out scripts/gpu-check.sh
#   CUDA_ARCHS=90 scripts/gpu-check.sh      # build for the GPU at hand only
#   SKIP_BENCH=1 / SKIP_CONFORMANCE=1 / SKIP_PROFILE=1 to shorten a rerun
#
# Where the build's Debian libraries are missing and .gpudeps/ holds them
# (scripts/gpu-deps.sh download), they are unpacked under /tmp first. Model
# files are git-ignored and larger than what the device tool sends: a missing
# one is made from its skeleton in .gpudeps/ (tools/gguf_random_like.py: the
# file's header and tensor table with random weights, the same speed), else
# skipped and said so.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
BUILD=${BUILD_DIR:-$ROOT/build-cuda}
JOBS=${JOBS:-$(nproc)}
DEPS=$ROOT/.gpudeps
PEAK_GBS=${PEAK_GBS:-4800}  # H200 HBM3e; the decode roofline is against this
mkdir -p "$OUT"
LOGS=$(mktemp -d)  # every log; packed into $OUT/logs.tar.gz at exit
SUMMARY=$OUT/summary.txt  # written as it goes: a run cut short still says how far it got
: > "$SUMMARY"
finish() {
  cp "$SUMMARY" "$LOGS/"
  for f in conformance.txt doctor.txt bench_smollm2_q4_1.json bench_smollm2_q8_0.json bench_moe_q8_0.json; do
    [[ -f $LOGS/$f ]] && cp "$LOGS/$f" "$OUT/"
  done
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
}
trap finish EXIT
trap 'say "stopped by a signal"; exit 143' TERM INT
say() { echo "$*" | tee -a "$SUMMARY"; }
timed() {  # timed NAME LOGFILE SECONDS CMD...: runs CMD under a time limit, logs it, records exit code and time
  local name=$1 log=$2 limit=$3
  shift 3
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$log" 2>&1
  local rc=$?
  say "$name: exit $rc in $((SECONDS - t0)) s (log: $(basename "$log"))"
  return $rc
}
PYTHON=(env -u LD_LIBRARY_PATH python3)  # the carried libraries are for anymoe only

say "gpu-check $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(hostname) at $(date -u +%FT%TZ)"
{ nvidia-smi; echo; nvcc --version; echo; cmake --version; cat /etc/os-release; } > "$LOGS/machine.txt" 2>&1
say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"

# 0. Libraries: the system's if pkg-config finds them, else the carried .debs.
if ! pkg-config --exists libhwy cpp-httplib libutf8proc 2>/dev/null && compgen -G "$DEPS/*.deb" > /dev/null; then
  timed deps "$LOGS/deps.log" 120 scripts/gpu-deps.sh unpack "$DEPS" /tmp/anymoe-deps || exit 1
  # shellcheck disable=SC1091
  source /tmp/anymoe-deps/env.sh
fi

# 1. Build: CUDA on (sm_80 + sm_90, or CUDA_ARCHS), OpenCL off (not needed here).
if ! timed configure "$LOGS/configure.log" 300 cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DANYMOE_CUDA=ON -DANYMOE_OPENCL=OFF -DANYMOE_BUILD_BENCH=OFF \
    ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS}; then
  tail -30 "$LOGS/configure.log" >> "$SUMMARY"
  exit 1
fi
if ! timed build "$LOGS/build.log" 900 cmake --build "$BUILD" -j "$JOBS" \
    --target anymoe conformance_tests cli_tests; then
  grep -E -m 20 -B 2 -A 8 'error' "$LOGS/build.log" >> "$SUMMARY"
  exit 1
fi
ANYMOE=$BUILD/src/anymoe

# 2. The operator table on the device.
timed doctor "$LOGS/doctor.txt" 60 "$ANYMOE" doctor -m tests/golden/moe/glm_moe_dsa --backend cuda
head -5 "$LOGS/doctor.txt" | tee -a "$SUMMARY"

# 3. Every CUDA test (by name, or by its parameter: DeviceOps/1 is cuda), each
# in its own process (a kernel fault poisons its context), then the CLI's.
if [[ -z ${SKIP_CONFORMANCE:-} ]]; then
  mapfile -t tests < <("$BUILD/tests/conformance_tests" --gtest_list_tests |
    awk '/^[^ ]/ { suite = $1 } /^  / && tolower(suite $0) ~ /cuda/ { print suite $1 }')
  : > "$LOGS/conformance.txt"
  passed=0 skipped=() failed=()
  for t in "${tests[@]}"; do
    out=$(timeout -k 5 60 "$BUILD/tests/conformance_tests" --gtest_filter="$t" 2>&1)
    rc=$?
    echo "$out" >> "$LOGS/conformance.txt"
    if [[ $rc == 0 ]] && grep -q '^\[  SKIPPED \] 1 test' <<< "$out"; then
      skipped+=("$t")
    elif [[ $rc == 0 ]] && grep -q '^\[  PASSED  \] 1 test' <<< "$out"; then
      passed=$((passed + 1))
    else
      failed+=("$t (exit $rc)")
    fi
  done
  say "conformance: ${#tests[@]} CUDA tests, $passed passed, ${#skipped[@]} skipped, ${#failed[@]} failed"
  for t in "${skipped[@]}"; do say "  skipped: $t"; done
  for f in "${failed[@]}"; do say "  FAILED: $f"; done
  grep -E -A 3 '^\[ cuda|Failure|error' "$LOGS/conformance.txt" | head -80 | tee -a "$SUMMARY"
  # The first two failures again under compute-sanitizer: a kernel's bad
  # address or race is named there, with the kernel and the thread.
  for f in "${failed[@]:0:2}"; do
    t=${f% (exit*}
    timed "memcheck $t" "$LOGS/memcheck_${t//\//_}.log" 150 compute-sanitizer --tool memcheck \
      --print-limit 10 "$BUILD/tests/conformance_tests" --gtest_filter="$t"
    grep -E -m 12 'Invalid|Error|at 0x|by thread|ERROR SUMMARY' "$LOGS/memcheck_${t//\//_}.log" | tee -a "$SUMMARY"
  done
  timed cli-device-tests "$LOGS/cli_device.txt" 120 "$BUILD/tests/cli_tests" \
    --gtest_filter='DoctorCuda.*:*BenchOnDevice*'
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/cli_device.txt" | tee -a "$SUMMARY"
fi

# 3b. Expert parallelism on the device: 2 ranks under mpirun (where the build
# found MPI) against one process, tokens and logits byte for byte. On one GPU
# NCCL refuses two ranks on a device, so this runs the host-memory path and
# says so ("exchanging through host memory"); with 2+ GPUs, pass each rank its
# own (docs/distributed.md) to run the NCCL one.
ep_check() {
  local mpirun model=tests/golden/moe/glm_moe_dsa
  mpirun=$(command -v mpirun || true)
  if [[ -z $mpirun ]] || ! grep -q 'ANYMOE_MPI:BOOL=ON' "$BUILD/CMakeCache.txt"; then
    say "ep: no mpirun or a build without MPI, skipped"
    return
  fi
  local run=("$ANYMOE" run -m "$model" --backend cuda --prompt-tokens 5,6,7,8,9,10,11,12,13,14
             -n 8 --temp 0 --ignore-eos --print-tokens --batch 4 -t 1)
  timed "ep one process" "$LOGS/ep_one.log" 60 "${run[@]}" --logits-out "$LOGS/ep_one.npy"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timed "ep 2 ranks" "$LOGS/ep_two.log" 120 \
    "$mpirun" -np 2 --oversubscribe --bind-to none "${run[@]}" --logits-out "$LOGS/ep_two.npy" --ep
  if cmp -s "$LOGS/ep_one.npy" "$LOGS/ep_two.npy"; then
    say "ep: 2 ranks on cuda give one process's logits byte for byte"
  else
    say "ep: LOGITS DIFFER between 2 ranks on cuda and one process"
  fi
  grep -E -m 4 'exchange|expert parallelism|error' "$LOGS/ep_two.log" | tee -a "$SUMMARY"
}
[[ -n ${SKIP_CONFORMANCE:-} ]] || ep_check

# 4. anymoe bench: pp128/pp512, tg64 at 1 and 8 sequences, mean ± sd of 5 runs,
# JSON with decode bytes per token.
model_file() {  # model_file NAME SKELETON: the bench file, made from its skeleton when missing
  local name=$1 skel=$DEPS/$2 file=$ROOT/models/bench/$1
  if [[ ! -f $file && -f $skel ]]; then
    mkdir -p "$ROOT/models/bench"
    timed "make $name (random weights, from $2)" "$LOGS/make_$name.log" 300 \
      "${PYTHON[@]}" tools/gguf_random_like.py fill "$skel" "$file" > /dev/null
  fi
  echo "$file"
}
bench() {  # bench NAME MODEL
  local name=$1 model=$2
  if [[ ! -e $model ]]; then
    say "bench $name: $model missing (git-ignored; see docs/benchmarks.md), skipped"
    return
  fi
  # One run, in JSON; the summary's table and rooflines are printed from it.
  timed "bench $name" "$LOGS/bench_$name.json" 240 bash -c '"$@" 2> "'"$LOGS/bench_$name.err"'"' \
    _ "$ANYMOE" bench -m "$model" --backend cuda -p 128,512 -n 64 --parallel 1,8 -r 5 -o json --membw
  "${PYTHON[@]}" - "$LOGS/bench_$name.json" "$PEAK_GBS" <<'PY' | tee -a "$SUMMARY"
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"  no JSON: {e}")
peak = float(sys.argv[2]) * 1e9
for r in rows:
    test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
    test += f"x{r['n_parallel']}" if r["n_parallel"] > 1 else ""
    line = f"  {r['model_type']} {test}: {r['avg_ts']:.1f} ± {r['stddev_ts']:.1f} t/s"
    if r.get("decode_bytes_per_token"):
        bound = peak / r["decode_bytes_per_token"]
        line += (f" = {100 * r['avg_ts'] / bound:.2f} % of the {sys.argv[2]} GB/s decode roofline"
                 f" ({bound:.0f} t/s, {r['decode_bytes_per_token'] / 1e6:.1f} MB/token)")
    print(line)
PY
}
# 5. anymoe serve on the device under bench-serve's load: 8 warm-up requests,
# then 50 at concurrency 1 and 200 at concurrency 8 (input 90, output 64).
serve_bench() {  # serve_bench NAME MODEL
  local name=$1 model=$2 port=18080
  [[ -e $model ]] || { say "serve $name: $model missing, skipped"; return; }
  "$ANYMOE" serve -m "$model" --backend cuda --parallel 8 -c 2048 --port $port \
    > "$LOGS/serve_$name.log" 2>&1 &
  local pid=$! up=""
  for _ in $(seq 120); do
    "${PYTHON[@]}" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=1)" \
      2> /dev/null && { up=1; break; }
    sleep 0.5
  done
  if [[ -z $up ]]; then
    say "serve $name: not healthy within 60 s"; tail -5 "$LOGS/serve_$name.log" >> "$SUMMARY"
    kill "$pid"; return
  fi
  local load=(bench-serve --url "http://127.0.0.1:$port" --qps inf --input-len 90 --output-len 64
              --ignore-eos --seed 1)
  timeout 120 "$ANYMOE" "${load[@]}" --num-prompts 8 --concurrency 8 > /dev/null 2>&1
  for c in 1 8; do
    timed "bench-serve $name c$c" "$LOGS/serve_${name}_c$c.txt" 180 \
      "$ANYMOE" "${load[@]}" --num-prompts $((c == 1 ? 50 : 200)) --concurrency $c
    cat "$LOGS/serve_${name}_c$c.txt" >> "$SUMMARY"
  done
  kill -TERM "$pid"
  wait "$pid"
  say "serve $name: SIGTERM, exit $?"
}
# 6. Where a decode step's kernel time goes: ncu, one metric (each kernel's
# duration), a bench of two 8-sequence steps after the warm-up one; then the
# time of each backend op (anymoe bench --op-profile).
profile() {  # profile MODEL
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  [[ -n $ncu && -e $1 ]] || { say "profile: ncu or $1 missing, skipped"; return; }
  timed "ncu profile" "$LOGS/ncu.csv" 180 "$ncu" --metrics gpu__time_duration.sum --csv \
    --launch-count 4000 "$ANYMOE" bench -m "$1" --backend cuda -p 0 -n 2 --parallel 8 -r 1
  "${PYTHON[@]}" tools/ncu_step_summary.py "$LOGS/ncu.csv" --steps 1 2>&1 | head -24 | tee -a "$SUMMARY"
  # The same by backend op, each waited for (anymoe bench --op-profile).
  timed "op profile" "$LOGS/op_profile.md" 120 "$ANYMOE" bench -m "$1" --backend cuda -p 128 \
    -n 16 --parallel 1,8 -r 2 --op-profile
  grep -E '^ops of|^\| [A-Z]' "$LOGS/op_profile.md" | tee -a "$SUMMARY"
}
if [[ -z ${SKIP_BENCH:-} ]]; then
  default_model=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf  # make run's
  [[ -f $default_model ]] || default_model=$(model_file SmolLM2-135M-Instruct.Q4_1.gguf smollm2-q4_1.skel)
  bench smollm2_q4_1 "${SMOLLM2:-$default_model}"
  bench smollm2_q8_0 "$(model_file SmolLM2-135M-Instruct.Q8_0.gguf smollm2-q8_0.skel)"
  bench moe_q8_0 "${MOE_BENCH:-$(model_file glm45air-mini-Q8_0.gguf glm45air-mini-q8_0.skel)}"
  serve_bench smollm2_q8_0 "$(model_file SmolLM2-135M-Instruct.Q8_0.gguf smollm2-q8_0.skel)"
  [[ -z ${SKIP_PROFILE:-} ]] && profile "$(model_file SmolLM2-135M-Instruct.Q8_0.gguf smollm2-q8_0.skel)"
fi
say "done; results in $OUT (all logs in logs.tar.gz)"
