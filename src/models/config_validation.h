// Checks a ModelConfig read from an untrusted file before anything is sized
// from it, and names the RoPE scaling types both file formats share.
#pragma once

#include <string>

#include "models/model_config.h"

namespace anymoe {

// Every size positive and bounded, heads divisible, MoE/MLA/DSA settings
// consistent. `where` (the file) starts each error message.
Status ValidateConfig(const ModelConfig& config, const std::string& where);

Expected<RopeScaling::Type> RopeTypeFromName(const std::string& name, const std::string& where);

}  // namespace anymoe
