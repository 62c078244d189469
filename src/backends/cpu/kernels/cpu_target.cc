// The kernels' target switch (cpu_target.h) over Highway's dispatch: forcing a
// target means telling Highway that the CPU supports it and everything below
// it, and nothing above, so each kernel source's dispatch table picks the best
// target it was compiled for among those.

// AVX3_DL (AVX-512 VNNI) is generated only on request in Highway 1.0.3; the
// kernels that have it ask, so the list here must see it too.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include "backends/cpu/kernels/cpu_target.h"

#include <cctype>
#include <utility>

#include "hwy/targets.h"

#if HWY_ARCH_X86
#include <cpuid.h>
#elif HWY_ARCH_ARM_A64 && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace anymoe::kernels {
namespace {

std::string NameOf(int64_t target) {
  switch (target) {
#if HWY_ARCH_X86
    case HWY_AVX3_DL:
      return "avx512-vnni";
    case HWY_AVX3:
      return "avx512";
#endif
    default:
      break;
  }
  std::string name = hwy::TargetName(target);
  for (char& c : name) c = c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

int64_t g_selected = 0;  // the forced target's bit; 0: the CPU's best
constexpr uint32_t Bit(CpuExtension e) { return uint32_t(e); }

// The extensions this CPU has, whatever is selected; `real`: its Highway targets.
uint32_t CpuExtensions(int64_t real) {
  uint32_t ext = 0;
#if HWY_ARCH_X86
  unsigned a, b, c, d;
  // CPUID.(EAX=7, ECX=1):EAX[4] is AVX-VNNI; the OS saves ymm state wherever
  // Highway reports AVX2, the only target that uses it.
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)))
    ext |= Bit(CpuExtension::kAvxVnni);
  // AVX3_DL implies AVX-512 VNNI and VL, and an OS that saves their state: the
  // EVEX vpdpbusd on ymm registers runs.
  if (real & HWY_AVX3_DL) ext |= Bit(CpuExtension::kAvxVnniEvex);
#elif HWY_ARCH_ARM_A64 && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP), hwcap2 = getauxval(AT_HWCAP2);
  if (hwcap & HWCAP_ASIMDDP) ext |= Bit(CpuExtension::kDotProd);
#ifdef HWCAP2_I8MM
  if ((hwcap & HWCAP_ASIMDDP) && (hwcap2 & HWCAP2_I8MM)) ext |= Bit(CpuExtension::kI8mm);
#endif
#endif
  (void)real;
  return ext;
}

// The variants of one Highway target, best first: each set of extensions the
// CPU has that applies to it, down to none.
std::vector<std::pair<std::string, uint32_t>> Variants(int64_t target, uint32_t cpu) {
  std::vector<std::pair<std::string, uint32_t>> v;
#if HWY_ARCH_X86
  if (target == HWY_AVX2 && (cpu & Bit(CpuExtension::kAvxVnni))) {
    v.push_back({"-vnni", Bit(CpuExtension::kAvxVnni)});  // VEX, the real thing
  } else if (target == HWY_AVX2 && (cpu & Bit(CpuExtension::kAvxVnniEvex))) {
    v.push_back({"-vnni", Bit(CpuExtension::kAvxVnni) | Bit(CpuExtension::kAvxVnniEvex)});
  }
#elif HWY_ARCH_ARM_A64
  const uint32_t dot = cpu & Bit(CpuExtension::kDotProd), mm = cpu & Bit(CpuExtension::kI8mm);
  if (target == HWY_NEON) {
    if (mm) v.push_back({"-i8mm", dot | mm});
    if (dot) v.push_back({"-dotprod", dot});
  } else if (dot) {  // SVE and SVE2 have their own dot products; i8mm is an extension
    v.push_back({"", dot | mm});
    return v;
  }
#endif
  (void)target, (void)cpu;
  v.push_back({"", 0});
  return v;
}

// What this CPU supports, whatever is forced now.
int64_t RealSupportedTargets() {
  hwy::SetSupportedTargetsForTest(0);
  const int64_t real = hwy::SupportedTargets();
  // Every target at or below the forced one (lower bits are better targets).
  if (g_selected != 0) hwy::SetSupportedTargetsForTest(real & ~(g_selected - 1));
  return real;
}

}  // namespace

std::vector<CpuTarget> AvailableCpuTargets() {
  std::vector<CpuTarget> targets;
  const int64_t real = RealSupportedTargets();
  const uint32_t cpu = CpuExtensions(real);
  for (int64_t left = real & HWY_TARGETS; left != 0; left &= left - 1) {
    const int64_t target = left & ~(left - 1);
    for (const auto& [suffix, extensions] : Variants(target, cpu)) {
      targets.push_back({NameOf(target) + suffix, target, extensions});
    }
  }
  return targets;
}

namespace {
uint32_t BestExtensions() {
  const std::vector<CpuTarget> targets = AvailableCpuTargets();
  return targets.empty() ? 0 : targets.front().extensions;
}
// Extensions the kernels may use now: the best target's until one is selected.
// Set before main (kernels read it from any thread without a lock).
uint32_t g_extensions = BestExtensions();
}  // namespace

CpuTarget ActiveCpuTarget() {
  const int64_t active = hwy::SupportedTargets() & HWY_TARGETS;
  const int64_t best = active & ~(active - 1);
  for (const CpuTarget& t : AvailableCpuTargets()) {
    if (t.highway == best && t.extensions == g_extensions) return t;
  }
  return {NameOf(best), best, g_extensions};
}

bool CpuExtensionActive(CpuExtension e) { return (g_extensions & Bit(e)) != 0; }

Status SelectCpuTarget(std::string_view name) {
  const std::vector<CpuTarget> targets = AvailableCpuTargets();
  if (name == "best") {
    g_selected = 0;
    g_extensions = targets.empty() ? 0 : targets.front().extensions;
    hwy::SetSupportedTargetsForTest(0);
    return Status::Ok();
  }
  std::string known;
  for (const CpuTarget& t : targets) {
    if (t.name == name) {
      g_selected = t.highway;
      g_extensions = t.extensions;
      hwy::SetSupportedTargetsForTest(0);
      hwy::SetSupportedTargetsForTest(hwy::SupportedTargets() & ~(t.highway - 1));
      return Status::Ok();
    }
    known += (known.empty() ? "" : ", ") + t.name;
  }
  return Status::Error("--cpu-target: '" + std::string(name) +
                       "' is not a target this CPU and build can run (available: best, " + known +
                       ")");
}

}  // namespace anymoe::kernels
