#!/usr/bin/env bash
# Instructions per call of the integer matmul kernels on each aarch64 CPU target,
# counted under qemu-aarch64 with a TCG plugin (tools/qemu_insn_count.c): a speed
# proxy that needs no ARM machine and has no timing noise. Each figure is
# (count at 3 calls - count at 1 call) / 2, so start-up is not in it; a call
# quantises x and multiplies all N weight rows on one thread.
#   scripts/arm-insn-count.sh [TARGETS...]   (default: neon neon-dotprod neon-i8mm sve sve2)
# Needs the cross build (scripts/test-arm64.sh). SVE_VL (bytes, default 16 and 32)
# sets qemu's SVE vector lengths for the sve* targets.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR_ARM64:-build-arm64}
driver="$BUILD_DIR/quant_matmul_calls"
[[ -x $driver ]] || { echo "no $driver: run scripts/test-arm64.sh first" >&2; exit 1; }
plugin="$BUILD_DIR/libqemu_insn_count.so"
cc -O2 -shared -fPIC -fvisibility=hidden -o "$plugin" tools/qemu_insn_count.c

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(neon neon-dotprod neon-i8mm sve sve2)
# SmolLM2-135M shapes: q/k/v/o-sized (k 576) for the 32-blocks, the down
# projection (k 1536) for the k-quants (k must be a multiple of 256).
shapes=("q8_0 576 1536" "q4_0 576 1536" "q4_1 576 1536" "q4_k 1536 576" "q6_k 1536 576")

count() {  # CPU REPS TYPE K N T TARGET -> instructions
  local cpu=$1 reps=$2; shift 2
  QEMU_CPU=$cpu QEMU_LD_PREFIX=/usr/aarch64-linux-gnu \
    qemu-aarch64 -plugin "$plugin" "$driver" "$1" "$2" "$3" "$4" "$reps" "$5" $LAYOUT 2>&1 >/dev/null |
    sed -n 's/^insns //p'
}
# LAYOUT=file: weights in place even where the target has panel kernels
# (--no-repack); by default they are stored as panels there, as at load.
LAYOUT=${LAYOUT:-}

printf '%-6s %-5s %-5s %-3s %-18s %12s %14s\n' type k n t target insns/call insns/block
for shape in "${shapes[@]}"; do
  read -r type k n <<<"$shape"
  for t in 1 8; do
    for target in "${targets[@]}"; do
      cpus=("max")
      if [[ $target == sve* ]]; then
        cpus=()
        for vl in ${SVE_VL:-16 32}; do cpus+=("max,sve-default-vector-length=$vl"); done
      fi
      for cpu in "${cpus[@]}"; do
        one=$(count "$cpu" 1 "$type" "$k" "$n" "$t" "$target")
        three=$(count "$cpu" 3 "$type" "$k" "$n" "$t" "$target")
        per_call=$(((three - one) / 2))
        label=$target
        [[ $cpu == *length=* ]] && label="$target/vl${cpu##*=}"
        # per block of 32 weights and activation row
        awk -v c="$per_call" -v k="$k" -v n="$n" -v t="$t" -v ty="$type" -v l="$label" \
          'BEGIN { printf "%-6s %-5s %-5s %-3s %-18s %12d %14.2f\n", ty, k, n, t, l, c, c / (k / 32 * n * t) }'
      done
    done
  done
done
