// <think> splitting as a small resumable state machine: a partial "</think>"
// or "<think>" at the end of the text is held back until the next chunk says
// whether it is the marker, so every chunking gives the same split.
#include "chat/reasoning.h"

namespace anymoe {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t PartialSuffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

bool PromptOpensReasoning(std::string_view prompt) {
  while (!prompt.empty() && IsSpace(prompt.back())) prompt.remove_suffix(1);
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
      while (i < buf_.size() && IsSpace(buf_[i])) ++i;
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
        const size_t keep = final ? 0 : PartialSuffix(buf_, kClose);
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
