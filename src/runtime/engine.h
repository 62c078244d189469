// Everything needed to run one model: its file, backend, forward pass,
// tokenizer and chat template, loaded together from one path. The CLI and the
// server both start from here.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "chat/model_chat_template.h"
#include "chat/tool_calls.h"
#include "distributed/communicator.h"
#include "models/experts/expert_parallel.h"
#include "models/model.h"
#include "models/model_file.h"
#include "runtime/expert_pruning.h"
#include "runtime/expert_streaming.h"
#include "runtime/warm_start.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {

// Expert parallelism over the ranks of an MPI job (docs/distributed.md).
struct ExpertParallelOptions {
  bool enabled = false;   // --ep (run and bench turn it on under mpirun with 2+ ranks)
  std::string placement;  // --ep-placement FILE (JSON); empty: contiguous ranges
  double timeout_s = 60;  // --ep-timeout: longest wait for the other ranks
  bool overlap = true;    // --ep-no-overlap: the shared expert waits for the exchange
};

struct EngineOptions {
  std::string model_path;
  std::string backend = "cpu";
  int threads = 0;                // 0: all cores
  int64_t context = 4096;         // tokens per sequence; capped by the model's maximum
  int64_t max_step_tokens = 128;  // prefill chunk
  std::string chat_template;      // "" = the model's own Jinja template; a name = a built-in renderer
  bool progress = true;           // show load progress on a TTY for large files
  bool exact_matmul = false;      // f32 activations everywhere (see BackendOptions)
  bool repack_weights = true;     // CPU panel layout for q8_0/q4_0/q4_1 (see BackendOptions)
  Int16Indexer int16_indexer = Int16Indexer::kAuto;  // CPU DSA prefill indexer (see BackendOptions)
  NumaMode numa = NumaMode::kNone;  // CPU threads and memory over NUMA nodes (see BackendOptions)
  int device = 0;                 // device index of a device backend
  uint64_t mem_budget = 0;        // device memory to reserve (0: what the model plans)
  int64_t kv_cache_tokens = 0;    // KV tokens to reserve for (0: `sequences` x context)
  int64_t sequences = 1;          // sequences served at once (serve --parallel)
  bool record_ops = false;        // record op x dtype usage (anymoe doctor)
  bool time_ops = false;          // time every op (anymoe bench --op-profile)
  // KV cache keys and values: f32 or f16 (cpu backend); empty: the backend's
  // DefaultKvType (f16 on the cpu backend).
  std::optional<DType> kv_type;
  // MLA models: absorbed (default), expanded or auto per prefill segment
  // (models/blocks/mla_form.h).
  MlaForm mla_form = MlaForm::kAbsorbed;
  // Bind the NextN / MTP layer (Model::mtp()) from the model file, or from
  // `mtp_path`, an MTP-only GGUF beside a trunk-only one.
  bool load_mtp = false;
  std::string mtp_path;
  // Routed experts streamed from disk through a RAM cache (--expert-cache ...).
  ExpertStreamingOptions experts;
  // --expert-profile FILE, --pin-experts PCT (runtime/warm_start.h).
  WarmStartOptions warm_start;
  // --expert-prune PROFILE:KEEP, --prune-by (runtime/expert_pruning.h).
  ExpertPruneOptions prune;
  ExpertParallelOptions expert_parallel;
};

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> Load(const EngineOptions& options);

  Model& model() { return *model_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelFile& file() const { return file_; }
  Backend& backend() { return model_->backend(); }
  int64_t context() const { return context_; }
  // Element type of the KV cache's GQA keys and values (EngineOptions::kv_type
  // resolved for the backend).
  DType kv_type() const { return kv_type_; }
  // Whether and how routed experts stream (see runtime/expert_streaming.h).
  const ExpertStreamingPlan& expert_streaming() const { return streaming_; }
  // The process's resident memory before any weight was loaded (code,
  // libraries, the tokenizer): what its RSS holds beyond the memory plan.
  uint64_t resident_before_weights() const { return resident_before_weights_; }
  // The experts --expert-prune keeps, or null.
  const ExpertSubset* expert_subset() const { return pruning_ ? &*pruning_ : nullptr; }
  // The warm start of --expert-profile, or null.
  WarmStart* warm_start() { return warm_start_.get(); }
  // The MPI job under expert parallelism, else null.
  Communicator* communicator() { return comm_.get(); }
  // Rank 0 prints; the others stay silent.
  bool is_root() const { return comm_ == nullptr || comm_->rank() == 0; }

  // Text to ids, with BOS when the model wants it and special tokens parsed.
  std::vector<int32_t> Encode(std::string_view text) const;
  // Renders a conversation with the model's chat template: its own Jinja
  // template (GGUF tokenizer.chat_template, tokenizer_config.json or
  // chat_template.jinja) unless --chat-template names a built-in renderer or
  // the model's template cannot be parsed (then the built-in one its markers
  // select).
  Expected<std::string> RenderChat(std::span<const ChatMessage> messages,
                                   bool add_generation_prompt) const;
  // A full chat request (tools, tool calls, reasoning, template kwargs) with
  // the model's Jinja template; message text stays plain (message_ranges).
  // Fails when the model has no usable Jinja template.
  Expected<RenderedChat> RenderChatRequest(const ChatRenderRequest& request) const;
  Expected<std::vector<int32_t>> EncodeChatRequest(const ChatRenderRequest& request) const;
  // The model's Jinja template, or null when a built-in renderer is in use.
  const ModelChatTemplate* model_chat_template() const {
    return model_template_ ? &*model_template_ : nullptr;
  }
  // How the model writes tool calls, from its template (kNone without one).
  ToolCallDialect tool_call_dialect() const;
  // Ids of the rendered conversation. Only the template's markup becomes
  // special tokens (it supplies BOS itself): a message containing e.g.
  // "<|im_end|>" is encoded as that text, so it cannot end its turn.
  Expected<std::vector<int32_t>> EncodeChat(std::span<const ChatMessage> messages,
                                            bool add_generation_prompt) const;
  // Stop tokens for generation (EOS, end of turn).
  std::vector<int32_t> StopTokens() const { return tokenizer_->stop_ids(); }

 private:
  Engine() = default;
  // Joins the MPI job and works out the expert placement for `file_`.
  Status StartExpertParallel(const ExpertParallelOptions& options);
  // Under expert parallelism on 2+ ranks: joins the backends' device exchange
  // (NCCL between CUDA ranks) where rank 0's backend has one.
  Status JoinDeviceExchange();
  // Declared first: the job outlives the model that calls into it.
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ExpertParallelism> ep_;
  ModelFile file_;
  std::optional<ModelFile> mtp_file_;
  std::optional<ExpertSubset> pruning_;  // what load.expert_subset points to
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<WarmStart> warm_start_;  // after model_: stops before it
  std::unique_ptr<Tokenizer> tokenizer_;
  Expected<ChatTemplateKind> chat_kind_ = Status::Error("no chat template");
  std::optional<ModelChatTemplate> model_template_;
  int64_t context_ = 0;
  DType kv_type_ = DType::kF32;
  ExpertStreamingPlan streaming_;
  uint64_t resident_before_weights_ = 0;
};

// Loads just the tokenizer of a model file (GGUF metadata or tokenizer.json).
Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelFile& file);

}  // namespace anymoe
