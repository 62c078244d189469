// <think> splitting as a small resumable state machine: a partial "</think>"
// or "<think>" at the end of the text is held back until the next chunk says
// whether it is the marker, so every chunking gives the same split.
#include "chat/reasoning.h"

#include "chat/stream_markers.h"

namespace anymoe {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";


}  // namespace

bool PromptOpensReasoning(std::string_view prompt) {
  while (!prompt.empty() && IsLayoutSpace(prompt.back())) prompt.remove_suffix(1);
  return prompt.size() >= kOpen.size() && prompt.substr(prompt.size() - kOpen.size()) == kOpen;
}

ReasoningParser::ReasoningParser(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoning : State::kStart) {}

ReasoningOutput ReasoningParser::Feed(std::string_view text) {
  ReasoningOutput out;
  buf_ += text;
  while (Step(false, &out)) {
  }
  return out;
}

ReasoningOutput ReasoningParser::Finish() {
  ReasoningOutput out;
  while (Step(true, &out)) {
  }
  (state_ == State::kReasoning ? out.reasoning : out.content) += buf_;
  buf_.clear();
  return out;
}

bool ReasoningParser::Step(bool final, ReasoningOutput* out) {
  switch (state_) {
    case State::kStart: {
      size_t i = 0;
      while (i < buf_.size() && IsLayoutSpace(buf_[i])) ++i;
      const std::string_view rest = std::string_view(buf_).substr(i);
      if (rest.substr(0, kOpen.size()) == kOpen) {
        buf_.erase(0, i + kOpen.size());  // whitespace before <think> is layout
        state_ = State::kReasoning;
        return true;
      }
      if (!final && (rest.empty() || kOpen.substr(0, rest.size()) == rest)) return false;
      state_ = State::kContent;
      return true;
    }
    case State::kReasoning: {
      const size_t close = buf_.find(kClose);
      if (close == std::string::npos) {
        const size_t keep = final ? 0 : PartialMarkerSuffix(buf_, kClose);
        out->reasoning.append(buf_, 0, buf_.size() - keep);
        buf_.erase(0, buf_.size() - keep);
        return false;
      }
      out->reasoning.append(buf_, 0, close);
      buf_.erase(0, close + kClose.size());
      state_ = State::kContent;
      return true;
    }
    case State::kContent:
      out->content += buf_;
      buf_.clear();
      return false;
  }
  return false;
}

ReasoningOutput SplitReasoning(std::string_view text, bool starts_in_reasoning) {
  ReasoningParser p(starts_in_reasoning);
  ReasoningOutput a = p.Feed(text);
  const ReasoningOutput b = p.Finish();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

}  // namespace anymoe
