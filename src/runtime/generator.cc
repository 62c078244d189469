#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime/decoding_sequence.h"
#include "runtime/mtp_drafter.h"
#include "runtime/token_decoder.h"
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
  std::string line = buf;
  if (drafted_tokens > 0) {
    std::snprintf(buf, sizeof(buf), " | draft: %lld of %lld accepted (%.1f %%), %.2f tokens/step",
                  static_cast<long long>(accepted_tokens), static_cast<long long>(drafted_tokens),
                  100 * acceptance(),
                  decode_steps > 0 ? double(generated_tokens - 1) / double(decode_steps) : 0.0);
    line += buf;
  }
  return line;
}

Generator::Generator(Model& model, const Tokenizer* tokenizer)
    : model_(model), tokenizer_(tokenizer) {
  step_logits_.resize(size_t(model.config().vocab_size));
}

Generator::~Generator() = default;

Expected<Sequence> Generator::NewSequence(int64_t capacity) {
  Sequence seq;
  ASSIGN_OR_RETURN(seq.cache, model_.NewCache(capacity));
  seq.tokens.reserve(size_t(capacity));
  return seq;
}

namespace {

// A lone generation's tokens: into the result, the text to the caller.
class ResultSink : public TokenSink {
 public:
  ResultSink(GenerateResult& result, bool record_logits, const TextCallback& on_text,
             Clock::time_point start)
      : result_(result), record_logits_(record_logits), on_text_(on_text), start_(start) {}

  void OnRow(std::span<const float> logits) override {
    if (record_logits_) result_.logits.insert(result_.logits.end(), logits.begin(), logits.end());
  }
  bool OnToken(const DecodedToken& token) override {
    if (result_.tokens.empty()) {
      first_token_ = Clock::now();
      result_.stats.ttft_seconds = SecondsSince(start_);
    }
    result_.tokens.push_back(token.token);
    return token.text.empty() || !on_text_ || on_text_(token.text);
  }
  Clock::time_point first_token() const { return first_token_; }

 private:
  GenerateResult& result_;
  bool record_logits_;
  const TextCallback& on_text_;
  Clock::time_point start_, first_token_;
};

}  // namespace

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
  const bool mtp = options.spec.kind == SpecKind::kMtp;
  if (mtp) {
    if (model_.mtp() == nullptr) {
      return Status::Error("--spec mtp needs the model's MTP layer: load it with --mtp");
    }
    if (!seq.mtp_cache) {
      ASSIGN_OR_RETURN(seq.mtp_cache, model_.NewMtpCache(seq.capacity()));
    }
    if (!mtp_) mtp_ = std::make_unique<MtpDrafter>(model_);
    // The MTP rows end a token short of the trunk's; the trunk reruns from
    // there, so that the MTP layer gets the state it pairs with the next token.
    // (Truncate above kept the MTP rows whose next token is still in the prompt.)
    common = std::min(common, size_t(seq.mtp_cache->length()));
    seq.tokens.resize(common);
    seq.cache->set_length(int64_t(common));
  }
  result.stats.reused_tokens = int64_t(common);
  result.stats.prompt_tokens = int64_t(prompt.size() - common);

  DecodingSequence s(prompt, int64_t(common), options, options.spec, options.constraint,
                     tokenizer_, seq.capacity(), model_.max_step_tokens());
  s.AttachCaches(seq.cache.get(), mtp ? seq.mtp_cache.get() : nullptr);
  ResultSink sink(result, options.record_logits, on_text, start);
  // Whatever ends the loop, the sequence keeps the tokens its cache holds.
  const auto keep_cached = [&] {
    seq.tokens.assign(s.history().begin(), s.history().begin() + seq.cache->length());
  };
  const int64_t step_tokens = model_.max_step_tokens();
  do {
    const bool prompt_step = s.prompt_left() > 0;
    const bool last_chunk = prompt_step && s.prompt_left() <= step_tokens;
    // A lone sequence's drafts cost nearly nothing: its rows share the
    // weights' reads (row share 0).
    const auto tokens =
        prompt_step ? s.PrefillTokens(step_tokens) : s.DecodeTokens(step_tokens - 1, 0);
    auto logits = model_.Forward(tokens, *seq.cache, s.all_logits(), /*token_by_token=*/!prompt_step);
    if (!logits.ok()) {
      keep_cached();
      return logits.status();
    }
    if (last_chunk) {
      model_.backend().Synchronize();
      result.stats.prompt_seconds = SecondsSince(start);
    }
    Status st = s.Consume(model_.backend(), *logits, 0, step_logits_, sink);
    if (st.ok() && s.mtp_settle() != nullptr) {
      // The MTP layer's step even after the last token: its rows are the
      // next turn's.
      MtpSettle* settle = s.mtp_settle();
      st = mtp_->Settle(std::span(&settle, 1), model_.last_hidden());
    }
    if (!st.ok()) {
      keep_cached();
      return st;
    }
  } while (!s.done());
  keep_cached();
  result.reason = *s.stop();
  result.stats.generated_tokens = s.generated();
  result.stats.decode_steps = s.decode_steps();
  result.stats.drafted_tokens = s.drafted();
  result.stats.accepted_tokens = s.accepted();
  if (tokenizer_ != nullptr && !s.text().stopped()) {
    const std::string rest = s.Flush();
    if (!rest.empty() && on_text) on_text(rest);
  }
  result.text = s.text().text();
  result.stats.decode_seconds =
      result.stats.generated_tokens > 1
          ? std::chrono::duration<double>(Clock::now() - sink.first_token()).count()
          : 0.0;
  return result;
}

}  // namespace anymoe
