// GBNF grammars (llama-server's `grammar`): the fuzzer's text through
// ParseGbnf and GrammarConstraint::Create over a small real vocabulary
// (tests/golden/tokenizer/smollm2_small), then a bounded walk of masks: up to
// 12 steps, each taking the mask for a budget of 32 tokens and accepting one
// of the tokens it allows (chosen by the input). Checked: a refused grammar
// fails with a code; every token a mask allows is accepted; a mask that is
// over its work budget fails ApplyMask by name; an accepting mask's state can
// end. Layout: 1 byte of walk seed, then the grammar text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "chat/gbnf_grammar.h"
#include "chat/grammar_constraint.h"
#include "chat/vocabulary_index.h"
#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"

namespace {

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_gbnf: %s\n", what);
    std::abort();
  }
}

struct SmallVocab {
  std::unique_ptr<anymoe::Tokenizer> tokenizer;
  std::shared_ptr<const anymoe::VocabularyIndex> index;
};

const SmallVocab& Vocab() {
  static const SmallVocab v = [] {
    const std::string dir = anymoe::fuzz::GoldenDir() + "/tokenizer/";
    auto t = anymoe::Tokenizer::FromHfJson(dir + "smollm2_small.tokenizer.json",
                                           dir + "smollm2_small.tokenizer_config.json");
    Require(t.ok(), "cannot load the small SmolLM2 tokenizer");
    auto index = anymoe::VocabularyIndex::Build(**t);
    Require(index.ok(), "cannot index the small SmolLM2 vocabulary");
    return SmallVocab{std::move(t).value(), std::move(index).value()};
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (16 << 10)) return 0;
  const SmallVocab& vocab = Vocab();
  anymoe::fuzz::CpuBudget budget("fuzz_gbnf", 2000);
  anymoe::fuzz::ByteReader in(data, size);
  uint32_t seed = in.Byte();
  const std::string text(in.Rest());

  auto parsed = anymoe::ParseGbnf(text);
  if (!parsed.ok()) Require(!parsed.status().code().empty(), "a parse error without a code");
  const int32_t eos = vocab.tokenizer->eos_id();
  auto c = anymoe::GrammarConstraint::Create(text, vocab.index, {eos});
  if (!c.ok()) {
    Require(!c.status().code().empty(), "a grammar refused without a code");
    return 0;
  }
  Require(parsed.ok(), "a grammar the parser refused compiled");
  auto state = (*c)->NewState();
  auto* grammar_state = static_cast<anymoe::GrammarConstraintState*>(state.get());
  std::vector<float> logits(size_t(vocab.tokenizer->vocab_size()), 0.0f);
  for (int step = 0; step < 12; ++step) {
    const int64_t remaining = 32 - step;
    auto mask = grammar_state->Allowed(remaining);
    if (mask == nullptr) break;
    if (mask->over_budget) {
      const anymoe::Status s = state->ApplyMask(logits, remaining);
      Require(!s.ok() && !s.code().empty(), "an over-budget mask did not fail by name");
      break;
    }
    if (mask->accepting) Require(state->CanEnd(), "an accepting mask whose state cannot end");
    if (mask->walked.empty()) break;
    seed = seed * 1103515245u + 12345u;
    const int32_t token = mask->walked[(seed >> 8) % mask->walked.size()].first;
    const uint64_t bit = mask->bits[size_t(token) / 64] >> (size_t(token) % 64);
    Require((bit & 1) != 0, "a walked token is not in the mask");
    const anymoe::Status s = state->Accept(token);
    if (!s.ok()) {
      // The machine's own limits may stop a walk; anything else is a bug.
      Require(s.code() == "grammar_state_limit", "a token the mask allowed was refused");
      break;
    }
  }
  return 0;
}
