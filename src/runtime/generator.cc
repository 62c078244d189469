#include "runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

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

Expected<Sequence> Generator::NewSequence(int64_t capacity) {
  Sequence seq;
  ASSIGN_OR_RETURN(seq.cache, model_.NewCache(capacity));
  seq.tokens.reserve(size_t(capacity));
  return seq;
}

Expected<Tensor> Generator::Prefill(Sequence& seq, std::span<const int32_t> tokens, bool mtp) {
  Tensor logits;
  const size_t step = size_t(model_.max_step_tokens());
  for (size_t i = 0; i < tokens.size(); i += step) {
    const auto chunk = tokens.subspan(i, std::min(step, tokens.size() - i));
    // The MTP layer needs the trunk's state at every position (all rows).
    ASSIGN_OR_RETURN(logits, model_.Forward(chunk, *seq.cache, /*all_logits=*/mtp));
    const int64_t first = int64_t(seq.tokens.size());
    seq.tokens.insert(seq.tokens.end(), chunk.begin(), chunk.end());
    fed_.assign(chunk.begin(), chunk.end());
    if (mtp && i + chunk.size() < tokens.size()) {  // the last chunk waits for its next token
      RETURN_IF_ERROR(mtp_->Step(*seq.mtp_cache, first,
                                 model_.last_hidden().RowSlice(0, int64_t(chunk.size())),
                                 tokens.subspan(i + 1, chunk.size()), 0, draft_));
    }
  }
  return logits;
}

Status Generator::SettleMtp(Sequence& seq, int64_t first, size_t row, int32_t next,
                            int64_t max_draft) {
  mtp_next_.assign(fed_.begin() + 1, fed_.begin() + int64_t(row) + 1);
  mtp_next_.push_back(next);
  return mtp_->Step(*seq.mtp_cache, first,
                    model_.last_hidden().RowSlice(0, int64_t(mtp_next_.size())), mtp_next_,
                    max_draft, draft_);
}

void Generator::Propose(const Sequence& seq, const SpeculativeOptions& spec, int64_t budget) {
  draft_.clear();
  const int64_t n = std::min(spec.max_draft, budget);
  if (n <= 0) return;
  switch (spec.kind) {
    case SpecKind::kNone: break;
    case SpecKind::kNgram: ProposeNgramDraft(seq.tokens, n, spec.ngram, draft_); break;
    case SpecKind::kMtp: break;  // MtpDrafter::Step drafts
    case SpecKind::kCallback:
      if (spec.drafter) spec.drafter(seq.tokens, n, draft_);
      if (int64_t(draft_.size()) > n) draft_.resize(size_t(n));
      break;
  }
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

  ASSIGN_OR_RETURN(Tensor logits, Prefill(seq, prompt.subspan(common), mtp));
  model_.backend().Synchronize();
  result.stats.prompt_seconds = SecondsSince(start);

  TokenDecoder decoder(options, options.constraint, tokenizer_);
  Clock::time_point first_token_time;
  auto stop_on = [&](StopReason r) { result.reason = r; };
  draft_.clear();
  DraftGovernor governor(options.spec.min_acceptance);
  // The row of `logits` sampled next: 0 after a plain step; a verify step has
  // a row for the token fed and one per draft, and row r + 1 is sampled only
  // when the draft of row r was accepted. An MTP prefill has all rows.
  size_t row = size_t(logits.dim(0) - 1);
  bool last_accepted = false;
  for (int64_t step = 0;; ++step) {
    model_.backend().ReadF32(logits.RowSlice(int64_t(row), 1), step_logits_);
    if (options.record_logits) {
      result.logits.insert(result.logits.end(), step_logits_.begin(), step_logits_.end());
    }
    RETURN_IF_ERROR(decoder.Prepare(step_logits_));
    // Tokens this step and later may still sample: the budget, or the context
    // (a full cache still samples one last token). seq.tokens, not the
    // cache's length: that counts the drafts still being verified.
    const int64_t remaining = std::min(options.max_new_tokens - result.stats.generated_tokens,
                                       seq.capacity() - int64_t(seq.tokens.size()) + 1);
    const int32_t draft = row < draft_.size() ? draft_[row] : -1;
    ASSIGN_OR_RETURN(const DecodedToken decoded,
                     decoder.Choose(step_logits_, seq.tokens, draft, remaining));
    const int32_t id = decoded.token;
    last_accepted = decoded.accepted;
    if (step == 0) {
      first_token_time = Clock::now();
      result.stats.ttft_seconds = SecondsSince(start);
    }
    result.tokens.push_back(id);
    ++result.stats.generated_tokens;
    if (decoded.accepted) {  // its keys and values are in the cache already
      ++result.stats.accepted_tokens;
      seq.tokens.push_back(id);
    }
    if (!decoded.text.empty() && on_text && !on_text(decoded.text)) {
      stop_on(StopReason::kCancelled);
      break;
    }
    if (decoded.stop) {
      stop_on(*decoded.stop);
      break;
    }
    if (decoded.accepted) {
      ++row;
      continue;
    }
    seq.Truncate(seq.tokens.size());  // drops the rows of rejected drafts
    if (seq.cache->length() >= seq.capacity()) {
      stop_on(StopReason::kContextFull);
      break;
    }
    seq.tokens.push_back(id);
    // Drafts that fit the context, the token budget (the step samples one
    // token per draft plus one) and the step.
    if (!draft_.empty()) governor.Record(int64_t(draft_.size()), int64_t(row));
    const int64_t budget = governor.Allowed(
        std::min({seq.capacity() - int64_t(seq.tokens.size()),
                  options.max_new_tokens - result.stats.generated_tokens - 1,
                  model_.max_step_tokens() - 1}));
    if (mtp) {
      // The last step's rows 0..row are final: each followed by the next fed
      // token, the last by `id`.
      const int64_t first = int64_t(seq.tokens.size()) - 2 - int64_t(row);  // of fed_[0]
      Status st = SettleMtp(seq, first, row, id, std::min(options.spec.max_draft, budget));
      if (!st.ok()) {
        seq.tokens.pop_back();
        return st;
      }
    } else {
      Propose(seq, options.spec, budget);
    }
    if (options.spec.on_draft && !draft_.empty()) options.spec.on_draft(seq.tokens, draft_);
    step_tokens_.assign(1, id);
    step_tokens_.insert(step_tokens_.end(), draft_.begin(), draft_.end());
    auto next = model_.Forward(step_tokens_, *seq.cache, /*all_logits=*/!draft_.empty());
    if (!next.ok()) {
      seq.tokens.pop_back();  // not in the cache
      return next.status();
    }
    logits = *next;
    fed_ = step_tokens_;
    row = 0;
    ++result.stats.decode_steps;
    result.stats.drafted_tokens += int64_t(draft_.size());
  }
  if (mtp) {
    // The last step's settled rows into the MTP cache, for the next turn.
    const int64_t first = int64_t(seq.tokens.size()) - (last_accepted ? 2 : 1) - int64_t(row);
    RETURN_IF_ERROR(SettleMtp(seq, first, row, result.tokens.back(), 0));
  }
  seq.Truncate(seq.tokens.size());  // a stop inside a verify step leaves drafts behind
  if (tokenizer_ != nullptr && !decoder.text().stopped()) {
    const std::string rest = decoder.Flush();
    if (!rest.empty() && on_text) on_text(rest);
  }
  result.text = decoder.text().text();
  result.stats.decode_seconds = result.stats.generated_tokens > 1 ? SecondsSince(first_token_time)
                                                                  : 0.0;
  return result;
}

}  // namespace anymoe
