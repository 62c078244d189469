// Which of the two forms of multi-head latent attention a prefill segment runs
// in. Absorbed (the default): queries are projected into the latent space and
// attend MQA-style over the cached latent rows; each (query, key) pair costs
// heads x (2 kv_lora + rope) multiply-adds, and no cached key is touched
// beyond reading its latent. Expanded (what transformers computes): every
// cached key's latent is multiplied back out to per-head k_nope and v once per
// segment, then plain multi-head attention runs; a pair costs heads x (qk_head
// + v_head), so a long segment pays for the expansion and a short one does not.
// The two sum in different orders: a token's bits depend on the form its
// segment ran in, so only kAbsorbed and kExpanded (every segment one form) keep
// a prompt's logits independent of how it is chunked; kAuto takes the cheaper
// form per segment and gives that up (docs/models.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "models/model_config.h"

namespace anymoe {

enum class MlaForm { kAbsorbed, kExpanded, kAuto };

std::string_view MlaFormName(MlaForm form);
// "absorbed", "expanded" or "auto"; anything else is an error naming --mla-form.
Expected<MlaForm> ParseMlaForm(std::string_view name);

// Multiply-adds of one layer's attention for a segment of `t` new queries over
// `n_past` cached keys (query i sees n_past + i + 1 keys), excluding what both
// forms share (the q / kv_a / o projections). Absorbed counts q_nope's
// projection into the latent space and the value projection out of it;
// expanded counts rebuilding k_nope and v for all n_past + t keys.
double AbsorbedMlaMacs(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past);
double ExpandedMlaMacs(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past);

// kAuto's choice for a dense segment: expanded when its multiply-adds,
// weighted by what each kind costs on the CPU (mla_form.cc), take less time.
// DeepSeek-V3's shapes: chunks of 512 at any depth, of 256 up to ~1.3K keys
// deep, shorter ones at the start of a prompt only; GLM-5's: only within the
// first ~500 keys (its wider heads make a per-head key row dearer).
bool ExpandedMlaIsCheaper(const MlaConfig& m, int64_t heads, int64_t t, int64_t n_past);

// Heads per expanded attention call: the largest divisor of `heads` whose keys
// and values (and k_nope|v) for `max_keys` keys fit `budget_floats`, at least
// one. Short contexts run every head in one call, long ones a few at a time.
inline constexpr int64_t kMlaExpandBudgetFloats = int64_t(1) << 24;  // 64 MiB
int64_t ExpandedMlaHeadGroup(const MlaConfig& m, int64_t heads, int64_t max_keys,
                             int64_t budget_floats = kMlaExpandBudgetFloats);

}  // namespace anymoe
