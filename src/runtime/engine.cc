#include "runtime/engine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "models/kv_cache.h"

namespace anymoe {
namespace {

// Reads one byte per page of every weight so the mmap is resident before the
// first token, showing progress on a terminal (only worth it for big files).
void PrefaultWeights(const TensorSource& tensors, bool show) {
  uint64_t total = 0, done = 0;
  for (const TensorInfo& t : tensors.tensors()) total += t.bytes;
  if (total < (uint64_t(1) << 30) || !show || !::isatty(STDERR_FILENO)) return;
  volatile uint8_t sink = 0;
  int last_percent = -1;
  for (const TensorInfo& t : tensors.tensors()) {
    for (uint64_t off = 0; off < t.bytes; off += 4096) sink = sink + t.data[off];
    done += t.bytes;
    const int percent = int(done * 100 / total);
    if (percent != last_percent) {
      std::fprintf(stderr, "\rloading weights: %3d%% (%.1f / %.1f GiB)", percent,
                   double(done) / (1 << 30), double(total) / (1 << 30));
      last_percent = percent;
    }
  }
  std::fprintf(stderr, "\n");
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelFile& file) {
  if (file.format == ModelFormat::kGguf) return Tokenizer::FromGguf(*file.gguf);
  namespace fs = std::filesystem;
  const fs::path dir(file.path);
  const std::string json = (dir / "tokenizer.json").string();
  if (!fs::exists(json)) return Status::Error(file.path + ": folder has no tokenizer.json");
  const std::string config = (dir / "tokenizer_config.json").string();
  return Tokenizer::FromHfJson(json, fs::exists(config) ? config : "");
}

Expected<std::unique_ptr<Engine>> Engine::Load(const EngineOptions& options) {
  std::unique_ptr<Engine> e(new Engine());
  ASSIGN_OR_RETURN(e->file_, OpenModelFile(options.model_path));
  ASSIGN_OR_RETURN(e->tokenizer_, LoadTokenizer(e->file_));
  BackendOptions backend_options;
  backend_options.num_threads = options.threads;
  backend_options.exact_matmul = options.exact_matmul;
  backend_options.repack_weights = options.repack_weights;
  backend_options.numa = options.numa;
  backend_options.device = options.device;
  backend_options.mem_budget = options.mem_budget;
  backend_options.record_ops = options.record_ops;
  backend_options.time_ops = options.time_ops;
  ASSIGN_OR_RETURN(e->backend_, CreateBackend(options.backend, backend_options));
  LoadOptions load;
  load.max_step_tokens = options.max_step_tokens;
  load.context = options.context;
  load.kv_cache_tokens = options.kv_cache_tokens;
  load.sequences = options.sequences;
  load.kv_type = options.kv_type.value_or(DefaultKvType(*e->backend_));
  RETURN_IF_ERROR(CheckKvType(*e->backend_, load.kv_type));  // at load, not at the first cache
  e->kv_type_ = load.kv_type;
  ASSIGN_OR_RETURN(e->model_, LoadModel(e->file_, *e->backend_, load));
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
    e->chat_kind_ = DetectChatTemplate(e->tokenizer_->chat_template());
  }
  PrefaultWeights(e->file_.tensors(), options.progress);
  return e;
}

std::vector<int32_t> Engine::Encode(std::string_view text) const {
  return tokenizer_->Encode(text, tokenizer_->add_bos_default(), /*parse_special=*/true);
}

Expected<std::string> Engine::RenderChat(std::span<const ChatMessage> messages,
                                         bool add_generation_prompt) const {
  if (!chat_kind_.ok()) {
    return chat_kind_.status().WithContext(file_.path + ": cannot apply a chat template");
  }
  return anymoe::RenderChat(*chat_kind_, messages, add_generation_prompt);
}

Expected<std::vector<int32_t>> Engine::EncodeChat(std::span<const ChatMessage> messages,
                                                  bool add_generation_prompt) const {
  if (!chat_kind_.ok()) {
    return chat_kind_.status().WithContext(file_.path + ": cannot apply a chat template");
  }
  const RenderedChat chat = RenderChatWithRanges(*chat_kind_, messages, add_generation_prompt);
  return tokenizer_->EncodeWithPlainRanges(chat.text, /*add_bos=*/false, chat.message_ranges);
}

}  // namespace anymoe
