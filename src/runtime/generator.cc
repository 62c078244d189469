#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/logit_guard.h"
#include "runtime/text_stream.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

std::string_view StopReasonName(StopReason r) {
  switch (r) {
    case StopReason::kMaxTokens: return "length";
    case StopReason::kStopToken: return "stop";
    case StopReason::kStopString: return "stop";
    case StopReason::kContextFull: return "context_full";
    case StopReason::kCancelled: return "cancelled";
  }
  return "?";
}

void ApplyLogitBias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [id, b] : bias) {
    if (id >= 0 && size_t(id) < logits.size()) logits[size_t(id)] += b;
  }
}

std::string GenerateStats::Line() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "prompt: %lld tokens, %.1f tok/s | generated: %lld tokens, %.1f tok/s | "
                "ttft: %.1f ms",
                static_cast<long long>(prompt_tokens), prompt_tps(),
                static_cast<long long>(generated_tokens), gen_tps(), ttft_seconds * 1e3);
  return buf;
}

Generator::Generator(Model& model, const Tokenizer* tokenizer)
    : model_(model), tokenizer_(tokenizer) {
  step_logits_.resize(size_t(model.config().vocab_size));
}

Expected<Sequence> Generator::NewSequence(int64_t capacity) {
  Sequence seq;
  ASSIGN_OR_RETURN(seq.cache, model_.NewCache(capacity));
  seq.tokens.reserve(size_t(capacity));
  return seq;
}

Expected<Tensor> Generator::Prefill(Sequence& seq, std::span<const int32_t> tokens) {
  Tensor logits;
  const size_t step = size_t(model_.max_step_tokens());
  for (size_t i = 0; i < tokens.size(); i += step) {
    const auto chunk = tokens.subspan(i, std::min(step, tokens.size() - i));
    ASSIGN_OR_RETURN(logits, model_.Forward(chunk, *seq.cache, /*all_logits=*/false));
    seq.tokens.insert(seq.tokens.end(), chunk.begin(), chunk.end());
  }
  return logits;
}

Expected<GenerateResult> Generator::Generate(Sequence& seq, std::span<const int32_t> prompt,
                                             const GenerateOptions& options,
                                             const TextCallback& on_text) {
  if (prompt.empty()) return Status::Error("empty prompt");
  if (int64_t(prompt.size()) >= seq.capacity()) {
    return Status::Error("prompt of " + std::to_string(prompt.size()) +
                         " tokens does not fit the context of " +
                         std::to_string(seq.capacity()) + " tokens");
  }
  const auto start = Clock::now();
  GenerateResult result;
  result.tokens.reserve(size_t(std::min<int64_t>(options.max_new_tokens, seq.capacity())));
  // Reuse the cached common prefix, but always run at least one token to get logits.
  size_t common = 0;
  while (common < seq.tokens.size() && common < prompt.size() &&
         seq.tokens[common] == prompt[common]) {
    ++common;
  }
  common = std::min(common, prompt.size() - 1);
  seq.Truncate(common);
  result.stats.reused_tokens = int64_t(common);
  result.stats.prompt_tokens = int64_t(prompt.size() - common);

  ASSIGN_OR_RETURN(Tensor logits, Prefill(seq, prompt.subspan(common)));
  model_.backend().Synchronize();
  result.stats.prompt_seconds = SecondsSince(start);

  Sampler sampler(options.sampling);
  TextStream text(options.stop_strings);
  Clock::time_point first_token_time;
  auto stop_on = [&](StopReason r) { result.reason = r; };
  for (int64_t step = 0;; ++step) {
    model_.backend().ReadF32(logits, step_logits_);
    RETURN_IF_ERROR(CheckLogitsFinite(step_logits_));
    if (options.record_logits) {
      result.logits.insert(result.logits.end(), step_logits_.begin(), step_logits_.end());
    }
    ApplyLogitBias(step_logits_, options.logit_bias);
    if (options.constraint != nullptr) {
      // Tokens this step and later may still sample: the budget, or the context
      // (a full cache still samples one last token).
      const int64_t remaining = std::min(options.max_new_tokens - result.stats.generated_tokens,
                                         seq.capacity() - seq.cache->length() + 1);
      options.constraint->ApplyMask(step_logits_, remaining);
    }
    const int32_t id = sampler.Sample(step_logits_, seq.tokens);
    if (options.constraint != nullptr) RETURN_IF_ERROR(options.constraint->Accept(id));
    if (step == 0) {
      first_token_time = Clock::now();
      result.stats.ttft_seconds = SecondsSince(start);
    }
    result.tokens.push_back(id);
    ++result.stats.generated_tokens;
    if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) !=
        options.stop_tokens.end()) {
      stop_on(StopReason::kStopToken);
      break;
    }
    if (tokenizer_ != nullptr) {
      const std::string piece = text.Append(tokenizer_->TokenPiece(id));
      if (!piece.empty() && on_text && !on_text(piece)) {
        stop_on(StopReason::kCancelled);
        break;
      }
      if (text.stopped()) {
        stop_on(StopReason::kStopString);
        break;
      }
    }
    if (options.constraint != nullptr && options.constraint->IsComplete()) {
      stop_on(StopReason::kStopToken);
      break;
    }
    if (result.stats.generated_tokens >= options.max_new_tokens) {
      stop_on(StopReason::kMaxTokens);
      break;
    }
    if (seq.cache->length() >= seq.capacity()) {
      stop_on(StopReason::kContextFull);
      break;
    }
    const int32_t next[1] = {id};
    ASSIGN_OR_RETURN(logits, model_.Forward(next, *seq.cache, /*all_logits=*/false));
    seq.tokens.push_back(id);
  }
  if (tokenizer_ != nullptr && !text.stopped()) {
    const std::string rest = text.Flush();
    if (!rest.empty() && on_text) on_text(rest);
  }
  result.text = text.text();
  result.stats.decode_seconds = result.stats.generated_tokens > 1 ? SecondsSince(first_token_time)
                                                                  : 0.0;
  return result;
}

}  // namespace anymoe
