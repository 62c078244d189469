#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU (sm_80 or newer),
# the CUDA toolkit, CMake and Ninja, and no network: builds with CUDA, prints
# `anymoe doctor`, runs the conformance suite (every golden model on cuda
# against the CPU backend, op-level tests, fallback and device-memory tests),
# then `anymoe bench` on SmolLM2 and on the MoE bench file. $OUT (default
# ./gpu-check-out) gets at most 7 files, as the device tool returns at most 8:
# summary.txt (every step's exit code and time, the conformance rows, the
# bench tables and decode roofline), conformance.txt, doctor.txt, the bench
# JSONs, and logs.tar.gz with every log.
#
#   OUT=/tmp/out scripts/gpu-check.sh
#   SMOLLM2=path.gguf MOE_BENCH=path.gguf scripts/gpu-check.sh   # other model files
#   SKIP_BENCH=1 / SKIP_CONFORMANCE=1 to shorten a rerun
#
# The bench GGUFs are git-ignored (docs/benchmarks.md says how to make them)
# and larger than the 64 MiB working tree the device tool sends: a missing
# MoE file is generated with tools/gen_moe_bench_gguf.py (f16) when python3
# there has gguf, numpy and tokenizers; a file still missing is reported and
# skipped, and the tiny golden MoE model is benched so the step yields figures.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
BUILD=${BUILD_DIR:-$ROOT/build-cuda}
JOBS=${JOBS:-$(nproc)}
SMOLLM2=${SMOLLM2:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
MOE_BENCH=${MOE_BENCH:-$ROOT/models/bench/glm45air-mini-Q4_0.gguf}
PEAK_GBS=${PEAK_GBS:-4800}  # H200 HBM3e; the decode roofline is against this
mkdir -p "$OUT"
LOGS=$(mktemp -d)  # every log; packed into $OUT/logs.tar.gz at exit
SUMMARY=$LOGS/summary.txt
: > "$SUMMARY"
finish() {
  cp "$SUMMARY" "$OUT/"
  for f in conformance.txt doctor.txt bench_smollm2.json bench_moe.json; do
    [[ -f $LOGS/$f ]] && cp "$LOGS/$f" "$OUT/"
  done
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" .
}
trap finish EXIT
say() { echo "$*" | tee -a "$SUMMARY"; }
timed() {  # timed NAME LOGFILE CMD...: runs CMD, logs it, records exit code and seconds
  local name=$1 log=$2
  shift 2
  local t0=$SECONDS
  "$@" > "$log" 2>&1
  local rc=$?
  say "$name: exit $rc in $((SECONDS - t0)) s (log: $(basename "$log"))"
  return $rc
}

say "gpu-check $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(hostname) at $(date -u +%FT%TZ)"
{ nvidia-smi; echo; nvcc --version; echo; cmake --version; } > "$LOGS/machine.txt" 2>&1
say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"

# 1. Build: CUDA on (sm_80 + sm_90, or CUDA_ARCHS), OpenCL off (not needed here).
if ! timed configure "$LOGS/configure.log" cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DANYMOE_CUDA=ON -DANYMOE_OPENCL=OFF -DANYMOE_BUILD_BENCH=OFF \
    ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS}; then
  say "configure failed: see configure.log"
  exit 1
fi
if ! timed build "$LOGS/build.log" cmake --build "$BUILD" -j "$JOBS" \
    --target anymoe conformance_tests cli_tests; then
  say "build failed: see build.log"
  exit 1
fi
ANYMOE=$BUILD/src/anymoe

# 2. The operator table on the device.
timed doctor "$LOGS/doctor.txt" \
  "$ANYMOE" doctor -m tests/golden/moe/glm_moe_dsa --backend cuda
if [[ -f $SMOLLM2 ]]; then
  timed doctor-smollm2 "$LOGS/doctor_smollm2.txt" "$ANYMOE" doctor -m "$SMOLLM2" --backend cuda
fi

# 3. Conformance: all golden models on cuda vs the CPU, op-level tests, CUDA tests.
if [[ -z ${SKIP_CONFORMANCE:-} ]]; then
  timed conformance "$LOGS/conformance.txt" "$BUILD/tests/conformance_tests"
  grep -E '^\[ cuda|^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]' "$LOGS/conformance.txt" \
    | tee -a "$SUMMARY"
  timed doctor-cli-test "$LOGS/cli_doctor.txt" "$BUILD/tests/cli_tests" --gtest_filter='DoctorCuda.*'
fi

# 4. anymoe bench: pp128/pp512 and tg64, JSON with decode bytes per token.
bench() {  # bench NAME MODEL
  local name=$1 model=$2
  if [[ ! -e $model ]]; then
    say "bench $name: $model missing (git-ignored; see docs/benchmarks.md), skipped"
    return
  fi
  bench_json() {  # JSON alone on stdout; progress and warnings to .err
    "$ANYMOE" bench -m "$model" --backend cuda -p 128,512 -n 64 -r 5 -o json --membw \
      2> "$LOGS/bench_$name.err"
  }
  timed "bench $name" "$LOGS/bench_$name.json" bench_json
  "$ANYMOE" bench -m "$model" --backend cuda -p 128,512 -n 64 -r 3 -o md > "$LOGS/bench_$name.md" 2>&1
  cat "$LOGS/bench_$name.md" >> "$SUMMARY"
  if command -v python3 >/dev/null; then
    python3 - "$LOGS/bench_$name.json" "$PEAK_GBS" <<'PY' | tee -a "$SUMMARY"
import json, sys
rows = json.load(open(sys.argv[1]))
peak = float(sys.argv[2]) * 1e9
for r in rows:
    if r.get("n_gen", 0) > 0 and r.get("decode_bytes_per_token"):
        bound = peak / r["decode_bytes_per_token"]
        print(f"  tg{r['n_gen']}: {r['avg_ts']:.1f} t/s = {100 * r['avg_ts'] / bound:.1f}% of "
              f"the {sys.argv[2]} GB/s decode roofline ({bound:.0f} t/s, "
              f"{r['decode_bytes_per_token'] / 1e6:.1f} MB/token)")
PY
  fi
}
if [[ -z ${SKIP_BENCH:-} ]]; then
  if [[ ! -f $MOE_BENCH ]] && python3 -c 'import gguf, numpy, tokenizers' 2>/dev/null; then
    MOE_BENCH=$ROOT/models/bench/glm45air-mini-f16.gguf
    mkdir -p "$ROOT/models/bench"
    timed gen-moe-bench "$LOGS/gen_moe_bench.log" python3 tools/gen_moe_bench_gguf.py --out "$MOE_BENCH"
  fi
  bench smollm2 "$SMOLLM2"
  bench moe "$MOE_BENCH"
  [[ -e $MOE_BENCH ]] || bench golden_glm_moe_dsa "$ROOT/tests/golden/moe/glm_moe_dsa"
fi
say "done; results in $OUT (all logs in logs.tar.gz)"
