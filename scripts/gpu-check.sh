#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU (sm_80 or newer),
# the CUDA toolkit, CMake and Ninja, and no network: builds with CUDA, prints
# `anymoe doctor`, runs the conformance suite (every golden model on cuda
# against the CPU backend, op-level tests, fallback and device-memory tests),
# then `anymoe bench` on SmolLM2 and on the MoE bench file. Everything lands
# in $OUT (default ./gpu-check-out): summary.txt first, then one file per step.
#
#   OUT=/tmp/out scripts/gpu-check.sh
#   SMOLLM2=path.gguf MOE_BENCH=path.gguf scripts/gpu-check.sh   # other model files
#   SKIP_BENCH=1 / SKIP_CONFORMANCE=1 to shorten a rerun
#
# The bench GGUFs are git-ignored (docs/benchmarks.md says how to make them);
# a missing one is reported and skipped, and the tiny golden MoE model is
# benched instead so that the step always yields figures.
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
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
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
{ nvidia-smi; echo; nvcc --version; echo; cmake --version; } > "$OUT/machine.txt" 2>&1
say "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi failed')"

# 1. Build: CUDA on (sm_80 + sm_90, or CUDA_ARCHS), OpenCL off (not needed here).
if ! timed configure "$OUT/configure.log" cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DANYMOE_CUDA=ON -DANYMOE_OPENCL=OFF -DANYMOE_BUILD_BENCH=OFF \
    ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS}; then
  say "configure failed: see configure.log"
  exit 1
fi
if ! timed build "$OUT/build.log" cmake --build "$BUILD" -j "$JOBS" \
    --target anymoe conformance_tests cli_tests; then
  say "build failed: see build.log"
  exit 1
fi
ANYMOE=$BUILD/src/anymoe

# 2. The operator table on the device.
timed doctor "$OUT/doctor_glm_moe_dsa.txt" \
  "$ANYMOE" doctor -m tests/golden/moe/glm_moe_dsa --backend cuda
if [[ -f $SMOLLM2 ]]; then
  timed doctor-smollm2 "$OUT/doctor_smollm2.txt" "$ANYMOE" doctor -m "$SMOLLM2" --backend cuda
fi

# 3. Conformance: all golden models on cuda vs the CPU, op-level tests, CUDA tests.
if [[ -z ${SKIP_CONFORMANCE:-} ]]; then
  timed conformance "$OUT/conformance.txt" "$BUILD/tests/conformance_tests" \
    --gtest_output="xml:$OUT/conformance.xml"
  grep -E '^\[ cuda|^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]' "$OUT/conformance.txt" \
    | tee -a "$SUMMARY"
  timed doctor-cli-test "$OUT/cli_doctor.txt" "$BUILD/tests/cli_tests" --gtest_filter='DoctorCuda.*'
fi

# 4. anymoe bench: pp128/pp512 and tg64, JSON with decode bytes per token.
bench() {  # bench NAME MODEL
  local name=$1 model=$2
  if [[ ! -f $model ]]; then
    say "bench $name: $model missing (git-ignored; see docs/benchmarks.md), skipped"
    return
  fi
  bench_json() {  # JSON alone on stdout; progress and warnings to .err
    "$ANYMOE" bench -m "$model" --backend cuda -p 128,512 -n 64 -r 5 -o json --membw \
      2> "$OUT/bench_$name.err"
  }
  timed "bench $name" "$OUT/bench_$name.json" bench_json
  "$ANYMOE" bench -m "$model" --backend cuda -p 128,512 -n 64 -r 3 -o md > "$OUT/bench_$name.md" 2>&1
  cat "$OUT/bench_$name.md" >> "$SUMMARY"
  if command -v python3 >/dev/null; then
    python3 - "$OUT/bench_$name.json" "$PEAK_GBS" <<'PY' | tee -a "$SUMMARY"
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
  bench smollm2 "$SMOLLM2"
  bench moe "$MOE_BENCH"
  [[ -f $MOE_BENCH ]] || bench golden_glm_moe_dsa "$ROOT/tests/golden/moe/glm_moe_dsa"
fi
say "done; results in $OUT"
