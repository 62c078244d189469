#!/usr/bin/env bash
# Issue 19's side-by-side: anymoe on each x86 kernel target it has beyond
# AVX-512 (--cpu-target avx2, avx2-vnni) against llama.cpp built for the same
# ISA (AVX2 + FMA + F16C, AVX-512 off), interleaved, on SmolLM2 Q8_0 / Q4_0 /
# Q4_1 and the MoE bench files, with anymoe's decode roofline (--membw); then
# the table (tools/bench_summary.py): prefill and decode ratios and each
# engine's decode as % of the roofline, per target.
#   tools/bench_cpu_targets.sh OUT_DIR [ROUNDS=3] [THREADS=2]
# Environment: LLAMA_BUILD (default /work/ext/llama.cpp-avx2/build), the
# llama.cpp build directory, made outside this repository with
#   cmake -S llama.cpp -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
#     -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
#     -DGGML_AVX_VNNI=OFF -DLLAMA_CURL=OFF   # GGML_AVX_VNNI=ON where the CPU has AVX-VNNI
#   ninja -C build llama-bench llama-quantize
# TARGETS (default: avx2 and avx2-vnni, those this CPU lists); RUN_PREFIX
# (default "chrt -f 10" as root). Missing bench files are made as
# docs/benchmarks.md "The files" says (tools/.venv's gguf, llama-quantize).
set -euo pipefail
out=$1 rounds=${2:-3} threads=${3:-2}
llama_build=${LLAMA_BUILD:-/work/ext/llama.cpp-avx2/build}
anymoe=${ANYMOE:-build/src/anymoe}
python=${PYTHON:-tools/.venv/bin/python}
bench=models/bench
mkdir -p "$bench"

quantize() {  # SRC DST TYPE
  [[ -f "$2" ]] || "$llama_build/bin/llama-quantize" "$1" "$2" "$3" 2
}
smol_f16=$bench/SmolLM2-135M-Instruct-from-Q4_1.F16.gguf
[[ -f "$smol_f16" ]] || "$python" tools/gguf_dequantize_f16.py models/SmolLM2-135M-Instruct.Q4_1.gguf "$smol_f16"
quantize "$smol_f16" "$bench/SmolLM2-135M-Instruct.Q8_0.gguf" Q8_0
quantize "$smol_f16" "$bench/SmolLM2-135M-Instruct.Q4_0.gguf" Q4_0
[[ -f "$bench/glm45air-mini-f16.gguf" ]] || "$python" tools/gen_moe_bench_gguf.py
quantize "$bench/glm45air-mini-f16.gguf" "$bench/glm45air-mini-Q8_0.gguf" Q8_0
quantize "$bench/glm45air-mini-f16.gguf" "$bench/glm45air-mini-Q4_0.gguf" Q4_0

if [[ -z "${TARGETS:-}" ]]; then
  available=$("$anymoe" bench --help | grep -o -- '--cpu-target.*' | tr ',' ' ')
  TARGETS=""
  for t in avx2-vnni avx2; do
    [[ " $available " == *" $t "* ]] && TARGETS+=" $t"
  done
fi
if [[ -z "${RUN_PREFIX+x}" && $(id -u) == 0 ]]; then export RUN_PREFIX="chrt -f 10"; fi
mkdir -p "$out"
echo "targets:$TARGETS; llama.cpp: $llama_build; $(grep -m1 'model name' /proc/cpuinfo)" | tee -a "$out/log.txt"
ANYMOE="$anymoe" ANYMOE_TARGETS="$TARGETS" ANYMOE_ARGS="--membw" \
  tools/bench_side_by_side.sh "$out" "$llama_build/bin/llama-bench" "$rounds" "$threads" \
  "$bench/SmolLM2-135M-Instruct.Q8_0.gguf" "$bench/SmolLM2-135M-Instruct.Q4_0.gguf" \
  models/SmolLM2-135M-Instruct.Q4_1.gguf \
  "$bench/glm45air-mini-Q8_0.gguf" "$bench/glm45air-mini-Q4_0.gguf"
tools/bench_summary.py "$out"
