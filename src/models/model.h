// What the runtime sees of a model: a config, a way to make a KV cache, and a
// forward step that appends tokens to a sequence and returns logits.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "backends/backend.h"
#include "models/blocks/mla_form.h"
#include "models/blocks/step_context.h"
#include "models/experts/expert_cache.h"
#include "models/expert_subset.h"
#include "models/kv_cache.h"
#include "models/model_config.h"
#include "models/model_file.h"

namespace anymoe {

// Tokens routed to each expert, per MoE layer, since load or the last reset.
// With streamed experts, also the expert cache's counters.
struct RoutingStats {
  int64_t experts_per_token = 0;
  std::vector<int64_t> layers;               // indices of the MoE layers
  std::vector<std::vector<int64_t>> counts;  // [moe layer][expert]
  ExpertCacheStats cache;                    // cache.enabled: experts are streamed
};

struct ExpertParallelism;  // models/experts/expert_parallel.h

struct LoadOptions {
  int64_t max_step_tokens = 128;  // most tokens one Forward call takes (prefill chunk)
  // Device backends reserve memory at load for a KV cache of this many tokens
  // (all sequences together); 0: `sequences` x `context` tokens.
  int64_t kv_cache_tokens = 0;
  int64_t context = 4096;  // capped by the model's maximum positions
  int64_t sequences = 1;
  DType kv_type = DType::kF32;  // GQA keys and values in the KV cache: f32, f16, q8_0, q4_0
  // MLA models: the form prefill segments run in (models/blocks/mla_form.h).
  MlaForm mla_form = MlaForm::kAbsorbed;
  // Scratch for one head group of the expanded form (tests shrink it to run
  // several groups).
  int64_t mla_expand_budget_floats = kMlaExpandBudgetFloats;
  // Bind the NextN / MTP layer (Model::mtp()) from the model file, or from
  // `mtp_file`, an MTP-only GGUF beside a trunk-only one (implies load_mtp).
  bool load_mtp = false;
  const ModelFile* mtp_file = nullptr;
  // Routed experts left in the file and read through a cache (CPU backend).
  ExpertCacheOptions expert_cache{};
  // --sticky-experts: the router margin below which a one-token step keeps the
  // previous token's experts (0: off).
  float sticky_experts = 0;
  // Hybrid placement on a device backend (--cpu-moe, --n-cpu-moe N): the
  // routed experts of layers [0, cpu_moe_layers) stay in host memory and run
  // on the CPU, everything else on the device (INT64_MAX: every layer).
  int64_t cpu_moe_layers = 0;
  // Expert parallelism (models/experts/expert_parallel.h): this rank prepares
  // and runs only the routed experts the placement gives it (null: all).
  const ExpertParallelism* expert_parallel = nullptr;
  // Expert pruning (--expert-prune): only these experts of each MoE layer are
  // loaded and routed to; the model has kept_per_layer() experts per layer
  // (null: all). Checked against the file's config at load.
  const ExpertSubset* expert_subset = nullptr;
  // Set by PlanMemory: size what the load would allocate, start nothing.
  bool planning = false;
  // The backend a plan is for: PlanMemory counts the host scratch its
  // ReserveForContext would hold (null: none).
  const Backend* plan_backend = nullptr;
  // Called with the bytes of each weight as it is prepared (load progress).
  std::function<void(uint64_t bytes, bool done)> progress = nullptr;
};

class MtpBlock;


// Not thread-safe: one thread at a time runs a model (the scheduler's thread
// while a Scheduler owns it).
class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() = 0;
  int64_t max_step_tokens() const { return max_step_tokens_; }

  // A paged KV pool shared by many sequences: room for `tokens` tokens in all,
  // none longer than `max_sequence` tokens (what the backend's per-op scratch
  // is sized for; the one-argument form: `tokens`).
  virtual Expected<std::unique_ptr<KvPool>> NewPool(int64_t tokens, int64_t max_sequence) = 0;
  Expected<std::unique_ptr<KvPool>> NewPool(int64_t tokens) { return NewPool(tokens, tokens); }
  // A cache for one sequence of up to `capacity` tokens with its own pool.
  Expected<std::unique_ptr<KvCache>> NewCache(int64_t capacity);

  // One sequence's part of a step: `tokens` at positions [cache->length(), +T).
  // Brace-initialise it with designated initialisers (.token_by_token = ...):
  // the flags are all bools, so a positional list silently sets the wrong one.
  struct SequenceStep {
    std::span<const int32_t> tokens;
    KvCache* cache = nullptr;
    bool all_logits = false;  // logits of every token, else of the last one
    // Also the hidden state of every token after the final norm
    // (last_embeddings()): what embedding requests pool. Logits do not change.
    bool embeddings = false;
    // Decode rows (the last token, replayed accepted tokens, drafts): a
    // recurrent layer takes them one by one in its recurrent form, so a
    // verify step computes bitwise what plain one-token decoding would.
    bool token_by_token = false;
  };
  // Runs several sequences in one pass (matmuls batched across all their
  // tokens, attention per sequence), appends their keys/values to their caches,
  // and returns the logits rows of each step in order. At most
  // max_step_tokens() tokens in all. The view is valid until the next call.
  // Errors (nothing changes then): a context or the KV pool is full, a token id
  // is outside the vocabulary.
  virtual Expected<Tensor> ForwardBatch(std::span<const SequenceStep> steps) = 0;

  // One sequence: logits [T, vocab] when `all_logits`, else [1, vocab].
  Expected<Tensor> Forward(std::span<const int32_t> tokens, KvCache& cache, bool all_logits,
                           bool token_by_token = false) {
    const SequenceStep step{
        .tokens = tokens, .cache = &cache, .all_logits = all_logits, .token_by_token = token_by_token};
    return ForwardBatch(std::span(&step, 1));
  }

  // The bound NextN / MTP layer (LoadOptions::load_mtp), or null.
  virtual const MtpBlock* mtp() const { return nullptr; }

  // The hidden states (before the final norm) of the rows whose logits the
  // last ForwardBatch or ForwardMtp returned, [rows, hidden]; valid until the
  // next call of either.
  virtual Tensor last_hidden() const { return Tensor(); }
  // The final-normed hidden states of every row of the last ForwardBatch's
  // steps that asked for `embeddings`, in step and row order, [rows, hidden];
  // valid until the next ForwardBatch.
  virtual Tensor last_embeddings() const { return Tensor(); }
  // A cache for the MTP layer of one sequence (its own pool, one layer).
  virtual Expected<std::unique_ptr<KvCache>> NewMtpCache(int64_t capacity) {
    (void)capacity;
    return Status::Error("the model has no MTP layer loaded (--mtp)");
  }
  // One MTP (NextN) step of several sequences (models/mtp_block.h), batched
  // as ForwardBatch batches the trunk: row i of a step joins its `hidden` row
  // (the trunk's, or the MTP's own for a further draft, at position
  // cache->length() + i; `hidden` holds the steps' rows in order) with the
  // embedding of tokens[i] (the token after that position) and predicts the
  // token after tokens[i]. Appends to each step's cache (the MTP layer's);
  // returns the logits rows each step asks for, and leaves the layer's output
  // hidden states of those rows in last_hidden(). `hidden` may be
  // last_hidden().
  virtual Expected<Tensor> ForwardMtp(std::span<const SequenceStep> steps, const Tensor& hidden) {
    (void)steps, (void)hidden;
    return Status::Error("the model has no MTP layer loaded (--mtp)");
  }
  // One sequence: logits [T, vocab] when `all_logits`, else [1, vocab].
  Expected<Tensor> ForwardMtp(std::span<const int32_t> tokens, const Tensor& hidden,
                              KvCache& cache, bool all_logits) {
    const SequenceStep step{tokens, &cache, all_logits};
    return ForwardMtp(std::span(&step, 1), hidden);
  }

  // DSA (GLM-5): the keys each query keeps from the next step on, in [1, the
  // index_topk the model was loaded with] (the selection buffers are sized for
  // that at load); a value >= the context makes every query attend densely.
  // For measuring DSA against dense MLA on the same weights (anymoe bench
  // --index-topk). An error, and nothing changes, for a model without DSA or a
  // value outside that range.
  virtual Status SetIndexTopK(int64_t topk) {
    (void)topk;
    return Status::Error("the model has no DSA indexer (index_topk)");
  }

  // The shape and dtype new weights for the routed experts of `layer` must
  // have; an error (code swap_unsupported / not_moe_layer) where they cannot
  // be replaced: a dense layer, streamed experts, expert parallelism, pruning.
  virtual Expected<ReplaceableExperts> ReplaceableExpertsOf(int64_t layer) const {
    (void)layer;
    return Status::Error("this model cannot replace experts", ErrorKind::kInvalidArgument,
                         "swap_unsupported");
  }
  // Makes expert `expert` of `layer` use `parts` (gate, up, down, checked
  // against ReplaceableExpertsOf) from the next forward pass on. `storage`
  // holds the bytes the parts point to; the model keeps it as long as a
  // backend may read them. The old weights are left alone (they belong to the
  // file mapping or the backend). Not thread-safe: the model's thread only.
  virtual Status ReplaceExpert(int64_t layer, int64_t expert,
                               const std::array<TensorInfo, kExpertParts>& parts,
                               std::shared_ptr<const void> storage) {
    (void)layer, (void)expert, (void)parts, (void)storage;
    return Status::Error("this model cannot replace experts", ErrorKind::kInvalidArgument,
                         "swap_unsupported");
  }

  virtual RoutingStats routing_stats() const = 0;
  // The routed-expert cache when experts stream (LoadOptions::expert_cache), else null.
  virtual ExpertCache* expert_cache() { return nullptr; }
  virtual void ResetRoutingStats() = 0;
  // Taps for tests and tools (null to remove); not owned.
  virtual void SetObserver(const ForwardObserver* observer) = 0;

  uint64_t weight_bytes() const { return weight_bytes_; }  // resident
  uint64_t activation_bytes() const { return activation_bytes_; }
  uint64_t streamed_bytes() const { return streamed_bytes_; }          // routed experts left in the file
  uint64_t expert_cache_bytes() const { return expert_cache_bytes_; }  // the cache's slots
  int64_t expert_cache_slots() const { return expert_cache_slots_; }
  uint64_t remote_expert_bytes() const { return remote_expert_bytes_; }  // routed experts other ranks own

 protected:
  int64_t max_step_tokens_ = 0;
  uint64_t weight_bytes_ = 0;
  uint64_t activation_bytes_ = 0;
  uint64_t streamed_bytes_ = 0;
  uint64_t expert_cache_bytes_ = 0;
  int64_t expert_cache_slots_ = 0;
  uint64_t remote_expert_bytes_ = 0;
};

// Builds the model for `file`'s architecture on `backend`. `file` must outlive it.
// A backend that wants_memory_plan() first gets ReserveMemory(PlanMemory(...)).
Expected<std::unique_ptr<Model>> LoadModel(const ModelFile& file, Backend& backend,
                                           const LoadOptions& options);
// LoadModel without the memory plan (what the planner itself runs).
Expected<std::unique_ptr<Model>> LoadModelUnplanned(const ModelFile& file, Backend& backend,
                                                    const LoadOptions& options);
// The KV cache size `options` plans for on `model`: `sequences` contexts of
// whole blocks, unless `kv_cache_tokens` names it.
int64_t KvCacheTokens(const Model& model, const LoadOptions& options);

}  // namespace anymoe
