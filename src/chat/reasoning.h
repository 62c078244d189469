// Splits generated text into reasoning (<think> ... </think>) and content,
// whole or streamed. A prompt that already opens the block (GLM-4.7/5.x,
// DeepSeek-V3.1 thinking: the generation prompt ends with "<think>") starts
// the output inside reasoning; otherwise a "<think>" at the start of the
// output (after whitespace, as GLM-4.5 writes "\n<think>") opens it.
// enable_thinking=false prompts end with "</think>" (or an empty block), so
// the output is content from the first byte.
#pragma once

#include <string>
#include <string_view>

namespace anymoe {

// Does the rendered prompt leave the model inside a reasoning block?
bool PromptOpensReasoning(std::string_view prompt);

struct ReasoningOutput {
  std::string reasoning;  // to append to reasoning_content
  std::string content;    // to append to content
};

class ReasoningParser {
 public:
  explicit ReasoningParser(bool starts_in_reasoning);
  ReasoningOutput Feed(std::string_view text);
  ReasoningOutput Finish();  // releases a held-back partial marker

 private:
  enum class State { kStart, kReasoning, kContent };
  bool Step(bool final, ReasoningOutput* out);
  State state_;
  std::string buf_;
};

// Whole text at once.
ReasoningOutput SplitReasoning(std::string_view text, bool starts_in_reasoning);

}  // namespace anymoe
