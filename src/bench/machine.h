// What a benchmark report says about the machine it ran on.
#pragma once

#include <string>

namespace anymoe {

// The CPU's model name from /proc/cpuinfo ("" where there is none).
std::string CpuModelName();

// The current time as RFC 3339 UTC ("2026-08-22T14:42:20Z"), as llama-bench writes it.
std::string UtcTimestamp();

}  // namespace anymoe
