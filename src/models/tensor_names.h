// Model weights are named here the way Hugging Face checkpoints name them
// ("model.layers.3.self_attn.q_proj.weight"); this maps such a name to the
// one llama.cpp uses in GGUF files ("blk.3.attn_q.weight").
#pragma once

#include <string>
#include <string_view>

namespace anymoe {

// The GGUF name of an HF-style tensor name in a file of llama.cpp architecture
// `gguf_arch`; the input unchanged when no rule applies.
std::string GgufTensorName(std::string_view gguf_arch, std::string_view hf_name);

// "model.layers.{layer}.{suffix}".
std::string LayerTensorName(int64_t layer, std::string_view suffix);

}  // namespace anymoe
