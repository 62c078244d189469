// Which SIMD code the CPU kernels run. Every kernel source is compiled once per
// Highway target and dispatched at run time to the best one the CPU has; this
// is the one switch over that choice, so that one machine can run (and the
// tests check) every target it supports, not only its best: a CI machine whose
// best target differs from the developer's must not be the first to run it.
// `anymoe --cpu-target NAME` and `doctor` use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace anymoe::kernels {

// Instructions that Highway 1.0.3 has no target for, which a target's kernels
// use when the selected CpuTarget allows them: the 256-bit vpdpbusd beside AVX2
// (kAvxVnni; "avx2-vnni"), and the int8 dot and matrix products beside NEON
// (dotprod: sdot/udot; i8mm: smmla/usdot). The AVX2 kernels' vpdpbusd is the
// VEX form of AVX-VNNI (Alder Lake and later, Zen 5); a CPU with AVX-512 VNNI
// but no AVX-VNNI (Zen 4, Ice Lake) runs the same 256-bit instruction in its
// EVEX form, which kAvxVnniEvex selects, so "avx2-vnni" is listed (and tested)
// there too: the two forms differ only in their encoding.
enum class CpuExtension : uint32_t {
  kAvxVnni = 1u << 0,
  kDotProd = 1u << 1,
  kI8mm = 1u << 2,
  kAvxVnniEvex = 1u << 8,  // with kAvxVnni: encode vpdpbusd as EVEX
};

struct CpuTarget {
  std::string name;         // e.g. "avx512-vnni", "avx2-vnni", "avx2", "neon-dotprod", "sve2"
  int64_t highway = 0;      // the Highway target bit (HWY_AVX3_DL, HWY_AVX2, ...)
  uint32_t extensions = 0;  // CpuExtension bits the kernels may use on it
};

// The targets compiled into the kernels that this CPU can run, best first; a
// Highway target appears once per set of extensions the CPU has for it (e.g.
// "avx2-vnni" before "avx2").
std::vector<CpuTarget> AvailableCpuTargets();

// The target the kernels dispatch to now.
CpuTarget ActiveCpuTarget();

// True when the active target allows `e`: what a kernel compiled for a Highway
// target checks before taking an extension's path. One load; no CPU query.
bool CpuExtensionActive(CpuExtension e);

// From now on the kernels dispatch to `name` (one of AvailableCpuTargets'
// names, or "best"); kernel sources not compiled for it take the best target
// below it, as they would on a CPU whose best target it is. Not thread-safe:
// call before any kernel runs (at start-up, or between tests).
Status SelectCpuTarget(std::string_view name);

}  // namespace anymoe::kernels
