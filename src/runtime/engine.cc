#include "runtime/engine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "core/mapped_file.h"
#include "core/system_memory.h"
#include "models/kv_cache.h"
#include "models/config_loader.h"
#include "runtime/load_progress.h"
#include "tokenizer/tokenizer_files.h"

namespace anymoe {
namespace {

}  // namespace

Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelFile& file) {
  if (file.format == ModelFormat::kGguf) return Tokenizer::FromGguf(*file.gguf);
  return TokenizerFromFolder(file.path);
}

Status Engine::StartExpertParallel(const ExpertParallelOptions& options) {
  if (!options.enabled) return Status::Ok();
  ASSIGN_OR_RETURN(comm_, Communicator::Join(CommunicatorOptions{options.timeout_s}));
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(file_));
  if (!config.is_moe()) {
    return Status::Error(file_.path + ": expert parallelism needs a MoE model (this one has no "
                                      "routed experts)");
  }
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (config.ffn_kinds[size_t(l)] == FfnKind::kMoe) moe_layers.push_back(l);
  }
  ep_ = std::make_unique<ExpertParallelism>();
  ep_->comm = comm_.get();
  ep_->overlap = options.overlap;
  if (options.placement.empty()) {
    ep_->placement = ExpertPlacement::Contiguous(comm_->size(), moe_layers, config.moe.num_experts);
  } else {
    ASSIGN_OR_RETURN(ep_->placement, ExpertPlacement::Load(options.placement, comm_->size(),
                                                           moe_layers, config.moe.num_experts));
  }
  return Status::Ok();
}

// Rank 0 makes the device exchange's job id and broadcasts it, or "none" when
// its backend has no device exchange (the CPU, OpenCL, a CUDA build without
// NCCL): then every rank's experts exchange through MPI. Every rank takes part
// in the broadcast whatever its backend, so the job's collectives stay in step.
Status Engine::JoinDeviceExchange() {
  Communicator& c = *comm_;
  if (c.size() < 2) return Status::Ok();
  constexpr size_t kMaxIdBytes = 256;  // NCCL's is 128
  std::vector<uint8_t> message(1 + kMaxIdBytes, 0);  // [has id, id bytes]
  DeviceExchange* dx = backend_->device_exchange();
  if (c.rank() == 0 && dx != nullptr) {
    Expected<std::vector<uint8_t>> id = dx->NewJobId();
    if (id.ok() && id->size() <= kMaxIdBytes) {
      message[0] = 1;
      std::copy(id->begin(), id->end(), message.begin() + 1);
    } else {
      std::fprintf(stderr, "anymoe: expert parallelism: %s; exchanging through host memory\n",
                   id.ok() ? "device exchange id too long" : id.status().message().c_str());
    }
  }
  RETURN_IF_ERROR(c.Broadcast(message, 0));
  if (message[0] == 0) return Status::Ok();
  if (dx == nullptr || dx->job_id_bytes() > kMaxIdBytes) {
    return Status::Error("expert parallelism: rank " + std::to_string(c.rank()) + "'s backend (" +
                         backend_->name() +
                         ") cannot exchange with rank 0's devices: run every rank on one backend");
  }
  const Status joined = dx->Join(std::span<const uint8_t>(message).subspan(1, dx->job_id_bytes()),
                                 c.rank(), c.size(), c.timeout_s());
  // Every rank learns whether all joined. Ranks sharing one GPU, for one,
  // cannot (NCCL refuses two ranks on a device): the job then exchanges
  // through host memory rather than failing.
  const float mine = joined.ok() ? 1.0f : 0.0f;
  std::vector<float> all(size_t(c.size()));
  std::vector<int> counts(size_t(c.size()), 1), displs(size_t(c.size()));
  for (int r = 0; r < c.size(); ++r) displs[size_t(r)] = r;
  RETURN_IF_ERROR(c.Allgatherv(std::span<const float>(&mine, 1), all, counts, displs));
  if (std::all_of(all.begin(), all.end(), [](float v) { return v == 1.0f; })) {
    if (c.rank() == 0) {
      std::fprintf(stderr, "anymoe: expert parallelism: the %d ranks exchange device to device\n",
                   c.size());
    }
    return Status::Ok();
  }
  dx->Leave();
  if (!joined.ok()) {
    std::fprintf(stderr, "anymoe: expert parallelism: rank %d: %s; exchanging through host memory\n",
                 c.rank(), joined.message().c_str());
  }
  return Status::Ok();
}

Expected<std::unique_ptr<Engine>> Engine::Load(const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine());
  ASSIGN_OR_RETURN(e->file_, OpenModelFile(options.model_path));
  if (!e->file_.note.empty()) std::fprintf(stderr, "anymoe: %s\n", e->file_.note.c_str());
  RETURN_IF_ERROR(e->StartExpertParallel(options.expert_parallel));
  ASSIGN_OR_RETURN(e->tokenizer_, LoadTokenizer(e->file_));
  e->resident_before_weights_ = ProcessResidentBytes();
  BackendOptions backend_options;
  backend_options.num_threads = options.threads;
  backend_options.exact_matmul = options.exact_matmul;
  backend_options.repack_weights = options.repack_weights;
  backend_options.int16_indexer = options.int16_indexer;
  backend_options.numa = options.numa;
  backend_options.device = options.device;
  backend_options.mem_budget = options.mem_budget;
  backend_options.record_ops = options.record_ops;
  backend_options.time_ops = options.time_ops;
  ASSIGN_OR_RETURN(e->backend_, CreateBackend(options.backend, backend_options));
  const bool cpu = e->backend_->kind() == BackendKind::kCpu;
  LoadOptions load;
  load.expert_parallel = e->ep_.get();
  load.max_step_tokens = options.max_step_tokens;
  load.context = options.context;
  load.kv_cache_tokens = options.kv_cache_tokens;
  load.sequences = options.sequences;
  load.kv_type = options.kv_type.value_or(DefaultKvType(*e->backend_));
  RETURN_IF_ERROR(CheckKvType(*e->backend_, load.kv_type));  // at load, not at the first cache
  e->kv_type_ = load.kv_type;
  load.mla_form = options.mla_form;
  load.load_mtp = options.load_mtp;
  if (!options.mtp_path.empty()) {
    ASSIGN_OR_RETURN(ModelFile mtp, OpenModelFile(options.mtp_path));
    e->mtp_file_ = std::move(mtp);
    load.mtp_file = &*e->mtp_file_;
  }
  if (!options.prune.spec.empty()) {
    if (!options.warm_start.profile.empty()) {
      return Status::Error("--expert-profile and --expert-prune do not combine yet (the warm "
                           "start's profile numbers the unpruned model's experts)",
                           ErrorKind::kInvalidArgument, "prune_unsupported");
    }
    ASSIGN_OR_RETURN(e->pruning_, PlanExpertPruning(e->file_, options.prune));
    load.expert_subset = &*e->pruning_;
    if (e->is_root()) {
      std::fprintf(stderr, "anymoe: %s\n", DescribePruning(*e->pruning_, options.prune).c_str());
    }
  }
  load.plan_backend = e->backend_.get();
  // On the CPU backend every expert is on the CPU already.
  load.cpu_moe_layers = cpu ? 0 : options.experts.cpu_moe_layers;
  ExpertStreamingOptions experts = options.experts;
  if (e->ep_ && experts.cache == "auto") experts.cache = "off";  // each rank holds only its share
  experts.pack_panels = options.repack_weights && !options.exact_matmul;
  const StreamingTarget target{cpu ? nullptr : e->backend_.get(), options.mem_budget};
  ASSIGN_OR_RETURN(e->streaming_, PlanExpertStreaming(e->file_, load, experts, target,
                                                      QuerySystemMemory()));
  if (!e->streaming_.note.empty()) std::fprintf(stderr, "anymoe: %s\n", e->streaming_.note.c_str());
  if (e->streaming_.stream) {
    // Resident weights are copied out of the mapping at load (reading them),
    // so nothing but the expert reads touches the file afterwards. (A device
    // backend uploads them: its ops never read the mapping.)
    if (cpu) {
      backend_options.copy_weights = true;
      ASSIGN_OR_RETURN(e->backend_, CreateBackend(options.backend, backend_options));
    }
    load.progress = LoadProgress::Callback("loading resident weights",
                                           e->streaming_.streamed.weights, options.progress);
  } else {
    // Each weight is read as it is prepared: repacked or copied (its file
    // pages released as it goes), uploaded, or faulted in for use in place
    // (BackendOptions::populate_weights). Reading the whole file first held
    // it all in the page cache and this process's resident set at once, up to
    // the file's size above the plan while panels were built.
    load.progress =
        LoadProgress::Callback("loading weights", e->streaming_.resident.weights, options.progress);
  }
  ASSIGN_OR_RETURN(e->model_, LoadModel(e->file_, *e->backend_, load));
  if (load.progress) load.progress(0, true);
  if (e->ep_) {
    const Communicator& c = *e->comm_;
    std::fprintf(stderr,
                 "anymoe: expert parallelism: rank %d of %d: resident weights %.2f MiB, other "
                 "ranks' experts %.2f MiB not loaded\n",
                 c.rank(), c.size(), double(e->model_->weight_bytes()) / (1 << 20),
                 double(e->model_->remote_expert_bytes()) / (1 << 20));
    // Ranks may load at different speeds: a longer wait than a step's.
    RETURN_IF_ERROR(e->comm_->Barrier(std::max(c.timeout_s(), 600.0)));
    RETURN_IF_ERROR(e->JoinDeviceExchange());
  }
  if (!options.warm_start.profile.empty()) {
    WarmStartOptions warm = options.warm_start;
    warm.progress = warm.progress && e->is_root();
    ASSIGN_OR_RETURN(e->warm_start_, WarmStart::Start(*e->model_, e->file_, warm));
  } else if (options.warm_start.pin_percent > 0) {
    return Status::Error("--pin-experts needs --expert-profile FILE (which experts to pin)",
                         ErrorKind::kInvalidArgument, "pin_without_profile");
  }
  if (e->model_->config().vocab_size < int64_t(e->tokenizer_->vocab_size())) {
    return Status::Error(options.model_path + ": tokenizer has " +
                         std::to_string(e->tokenizer_->vocab_size()) +
                         " tokens but the model only " +
                         std::to_string(e->model_->config().vocab_size));
  }
  e->context_ = std::min(options.context, e->model_->config().max_position_embeddings);
  if (!options.chat_template.empty()) {
    ASSIGN_OR_RETURN(ChatTemplateKind kind, ChatTemplateFromName(options.chat_template));
    e->chat_kind_ = kind;
  } else {
    ASSIGN_OR_RETURN(const std::string source,
                     ModelChatTemplateSource(e->file_.path, e->file_.format != ModelFormat::kGguf,
                                             e->tokenizer_->chat_template()));
    e->chat_kind_ = DetectChatTemplate(source);
    if (!source.empty()) {
      const Tokenizer& tok = *e->tokenizer_;
      const auto token_text = [&](int32_t id) {
        return id >= 0 ? std::string(tok.TokenPiece(id)) : std::string();
      };
      auto parsed = ModelChatTemplate::Parse(source, token_text(tok.bos_id()), token_text(tok.eos_id()));
      if (parsed.ok()) {
        e->model_template_ = std::move(*parsed);
      } else {
        std::fprintf(stderr, "anymoe: %s: %s; using the built-in renderer\n", options.model_path.c_str(),
                     parsed.status().message().c_str());
      }
    }
  }
  return e;
}

std::vector<int32_t> Engine::Encode(std::string_view text) const {
  return tokenizer_->Encode(text, tokenizer_->add_bos_default(), /*parse_special=*/true);
}

Expected<std::string> Engine::RenderChat(std::span<const ChatMessage> messages,
                                         bool add_generation_prompt) const {
  if (model_template_) {
    ChatRenderRequest request;
    request.messages = ChatMessagesToJson(messages);
    request.add_generation_prompt = add_generation_prompt;
    ASSIGN_OR_RETURN(RenderedChat chat, RenderChatRequest(request));
    return std::move(chat.text);
  }
  if (!chat_kind_.ok()) {
    return chat_kind_.status().WithContext(file_.path + ": cannot apply a chat template");
  }
  return anymoe::RenderChat(*chat_kind_, messages, add_generation_prompt);
}

Expected<std::vector<int32_t>> Engine::EncodeChat(std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt) const {
  if (model_template_) {
    ChatRenderRequest request;
    request.messages = ChatMessagesToJson(messages);
    request.add_generation_prompt = add_generation_prompt;
    return EncodeChatRequest(request);
  }
  if (!chat_kind_.ok()) {
    return chat_kind_.status().WithContext(file_.path + ": cannot apply a chat template");
  }
  const RenderedChat chat = RenderChatWithRanges(*chat_kind_, messages, add_generation_prompt);
  return tokenizer_->EncodeWithPlainRanges(chat.text, /*add_bos=*/false, chat.message_ranges);
}

Expected<RenderedChat> Engine::RenderChatRequest(const ChatRenderRequest& request) const {
  if (!model_template_) {
    return Status::Error(file_.path + ": the model has no Jinja chat template that anymoe can render");
  }
  return model_template_->Render(request);
}

Expected<std::vector<int32_t>> Engine::EncodeChatRequest(const ChatRenderRequest& request) const {
  ASSIGN_OR_RETURN(RenderedChat chat, RenderChatRequest(request));
  return tokenizer_->EncodeWithPlainRanges(chat.text, /*add_bos=*/false, chat.message_ranges);
}

ToolCallDialect Engine::tool_call_dialect() const {
  return model_template_ ? DetectToolCallDialect(model_template_->source()) : ToolCallDialect::kNone;
}

}  // namespace anymoe
