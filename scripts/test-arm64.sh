#!/usr/bin/env bash
# Cross-compiles the SIMD kernels and their tests for aarch64 (g++-aarch64-linux-gnu,
# ANYMOE_KERNELS_ONLY) into build-arm64/ and runs them under qemu-aarch64 through
# ctest. Needs scripts/install-arm64-deps.sh first (`make test-arm64` does both).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR_ARM64:-build-arm64}
JOBS=${JOBS:-2}
TRIPLE=aarch64-linux-gnu

# One process per test case (not ANYMOE_TEST_SHARDS): under qemu the kernel
# tests took 202 and 368 s as two long processes (shards), 69 s (ctest -j2)
# as one short process each.
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/$TRIPLE.cmake" \
  -DANYMOE_KERNELS_ONLY=ON -DCMAKE_BUILD_TYPE=Release -DANYMOE_TEST_SHARDS=OFF
cmake --build "$BUILD_DIR" -j "$JOBS"

# Which Highway targets the per-target tests run on under qemu: the same call
# tests/backends/kernels/for_each_target.h makes, in a tiny aarch64 program.
cat > "$BUILD_DIR/hwy_targets.cc" <<'CC'
#include <cstdio>
#include "hwy/targets.h"
int main() {
  std::printf("test-arm64: Highway targets under qemu:");
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) std::printf(" %s", hwy::TargetName(t));
  std::printf("\n");
}
CC
hwy_flags=$(PKG_CONFIG_LIBDIR=/usr/lib/$TRIPLE/pkgconfig pkg-config --cflags --libs libhwy)
# shellcheck disable=SC2086
$TRIPLE-g++ -std=c++20 -O2 "$BUILD_DIR/hwy_targets.cc" -o "$BUILD_DIR/hwy_targets" $hwy_flags
QEMU_LD_PREFIX=/usr/$TRIPLE qemu-aarch64 "$BUILD_DIR/hwy_targets"

ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
