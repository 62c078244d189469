// The GBNF constraint against Lark: every text of tests/golden/chat/
// gbnf_cases.json (tools/gen_gbnf_golden.py; labels from Lark's Earley
// parser, tools/gbnf_lark.py) gets the same label, accept / prefix / reject,
// fed byte by byte to the pushdown machine and token by token (SmolLM2's
// vocabulary) through the masks; then the named errors of bad grammars, the
// machine's limits, and random walks that must close within their budget.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <random>
#include <sstream>

#include "chat/gbnf_grammar.h"
#include "chat/grammar_constraint.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string GrammarFile(const std::string& name) {
  return Read(std::string(ANYMOE_GOLDEN_DIR) + "/chat/gbnf/" + name);
}

nlohmann::json Cases() {
  return nlohmann::json::parse(Read(std::string(ANYMOE_GOLDEN_DIR) + "/chat/gbnf_cases.json"));
}

// accept / prefix / reject of `text` read byte by byte; "limit" when the
// machine's limits stop it.
std::string LabelBytes(const GrammarPushdown& m, std::string_view text) {
  auto state = m.Start();
  if (!state.ok()) return "limit";
  for (uint8_t b : text) {
    auto next = m.Advance(*state, b);
    if (!next.ok()) return "limit";
    if (next->dead()) return "reject";
    state = std::move(next);
  }
  return m.Accepting(*state) ? "accept" : "prefix";
}

TEST(GbnfGrammar, AgreesWithLarkByteByByte) {
  const nlohmann::json cases = Cases();
  ASSERT_GE(cases.size(), 8u);
  std::map<std::string, int> labels;
  for (const auto& g : cases) {
    const std::string name = g["grammar"];
    auto grammar = ParseGbnf(GrammarFile(name));
    ASSERT_TRUE(grammar.ok()) << name << ": " << grammar.status().message();
    GrammarPushdown machine(std::move(*grammar));
    for (const auto& c : g["cases"]) {
      const std::string text = c["text"], want = c["label"];
      EXPECT_EQ(LabelBytes(machine, text), want) << name << ": " << nlohmann::json(text).dump();
      ++labels[want];
    }
  }
  // The corpus holds every label, many times.
  EXPECT_GE(labels["accept"], 100);
  EXPECT_GE(labels["prefix"], 100);
  EXPECT_GE(labels["reject"], 100);
}

std::shared_ptr<const VocabularyIndex> SmolVocab(std::unique_ptr<Tokenizer>* tok) {
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) return nullptr;
  auto t = Tokenizer::FromGguf(**gguf);
  if (!t.ok()) return nullptr;
  auto v = VocabularyIndex::Build(**t);
  if (!v.ok()) return nullptr;
  *tok = std::move(*t);
  return *v;
}

// The piece is complete UTF-8 (else a token splits a code point).
bool IsWholeUtf8(std::string_view piece) {
  for (size_t i = 0; i < piece.size();) {
    uint32_t cp;
    size_t len;
    if (DecodeUtf8At(piece, i, &cp, &len) != Utf8Step::kValid) return false;
    i += len;
  }
  return true;
}

bool Allowed(const GrammarConstraint::Mask& m, int32_t id) {
  return (m.bits[size_t(id) >> 6] >> (id & 63) & 1) != 0;
}

// Token by token as the model would write the text: each token is in the
// step's mask exactly when the grammar takes it, and the final label is Lark's.
TEST(GbnfGrammar, AgreesWithLarkTokenByTokenThroughTheMasks) {
  std::unique_ptr<Tokenizer> tok;
  auto vocab = SmolVocab(&tok);
  if (vocab == nullptr) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not present (make model)";
  const nlohmann::json cases = Cases();
  int checked = 0, masked_steps = 0, split_code_points = 0, unencodable = 0;
  for (const auto& g : cases) {
    const std::string name = g["grammar"];
    auto c = GrammarConstraint::Create(GrammarFile(name), vocab, {tok->eos_id()});
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().message();
    for (const auto& k : g["cases"]) {
      const std::string text = k["text"], want = k["label"];
      const std::vector<int32_t> ids = tok->Encode(text, /*add_bos=*/false, /*parse_special=*/false);
      if (tok->Decode(ids) != text) {
        ++unencodable;  // a control byte SmolLM2's vocabulary has no token for
        continue;
      }
      GrammarConstraintState state(*c);
      std::string label = "prefix";
      for (int32_t id : ids) {
        const std::string_view piece = vocab->piece(id);
        split_code_points += !IsWholeUtf8(piece);
        const auto mask = state.Allowed(int64_t(1) << 20);
        ++masked_steps;
        const Status st = state.Accept(id);
        EXPECT_EQ(Allowed(*mask, id), st.ok()) << name << ": token " << id << " of " << text;
        if (!st.ok()) {
          EXPECT_EQ(st.code(), "grammar_rejected_token");
          label = "reject";
          break;
        }
      }
      if (label != "reject" && state.CanEnd()) label = "accept";
      EXPECT_EQ(label, want) << name << ": " << nlohmann::json(text).dump();
      ++checked;
    }
  }
  std::printf("%d texts, %d masks checked (%d tokens that split a code point), %d texts "
              "the tokenizer cannot spell\n",
              checked, masked_steps, split_code_points, unencodable);
  EXPECT_GT(checked, 440);
}

std::string CodeOf(std::string_view grammar) {
  auto g = ParseGbnf(grammar);
  if (g.ok()) return "ok";
  return g.status().code();
}

TEST(GbnfGrammar, InvalidGrammarsHaveNamedErrors) {
  EXPECT_EQ(CodeOf("root ::= \"a\" | [b-c]* x\nx ::= \"x\"{2,3}"), "ok");
  EXPECT_EQ(CodeOf("root ::= \"abc"), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= [abc"), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= []"), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= [z-a]"), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= \"\\q\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= \"\\xZZ\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= * \"a\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= (\"a\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= \"a\"{3,2}"), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root = \"a\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= \"a\"\nroot ::= \"b\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= \"a\" )"), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= \"\xff\""), "grammar_parse_error");
  EXPECT_EQ(CodeOf("root ::= item\n"), "grammar_undefined_rule");
  EXPECT_EQ(CodeOf("item ::= \"a\"\n"), "grammar_missing_root");
  EXPECT_EQ(CodeOf(""), "grammar_missing_root");
  EXPECT_EQ(CodeOf("root ::= root \"a\" | \"b\""), "grammar_left_recursion");
  EXPECT_EQ(CodeOf("root ::= x \"a\" | \"b\"\nx ::= y? root\ny ::= \"y\""), "grammar_left_recursion");
  EXPECT_EQ(CodeOf("root ::= \"a\" root"), "grammar_empty_language");
  EXPECT_EQ(CodeOf("root ::= \"a\"{2000}"), "grammar_too_large");
  EXPECT_EQ(CodeOf("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')')),
            "grammar_too_large");
  EXPECT_EQ(CodeOf("root ::= \"" + std::string(300 * 1024, 'a') + "\""), "grammar_too_large");
  // {1024} of {1024} of {1024}: a billion characters, few elements; the
  // expansion limit bounds grammars that spell out the copies instead.
  EXPECT_EQ(CodeOf("root ::= ((\"a\"{1024}){1024}){1024}"), "ok");
  std::string many = "root ::= x0\n";
  for (int i = 0; i < 200; ++i) {
    many += "x" + std::to_string(i) + " ::= " + (i + 1 < 200 ? "x" + std::to_string(i + 1) : "\"a\"") +
            "{1000}\n";
  }
  EXPECT_EQ(CodeOf(many), "grammar_too_large");
  // The message points at the place.
  auto bad = ParseGbnf("root ::= \"a\"\nitem ::= [b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("2:"), std::string::npos) << bad.status().message();
  EXPECT_EQ(bad.status().kind(), ErrorKind::kInvalidArgument);
}

// Hostile grammars: one-byte edits and splices of the corpus grammars either
// compile or fail with one of the named codes, and a compiled one reads
// random bytes with every step a state or a named limit, never a crash.
TEST(GbnfGrammar, MutatedGrammarsCompileOrFailByName) {
  const std::set<std::string> codes = {"grammar_parse_error",    "grammar_undefined_rule",
                                       "grammar_missing_root",   "grammar_left_recursion",
                                       "grammar_empty_language", "grammar_too_large"};
  std::vector<std::string> grammars;
  for (const auto& g : Cases()) grammars.push_back(GrammarFile(g["grammar"]));
  const std::string alphabet = "()[]{}|*+?\\\"#:=-^.,0123456789 \nazAZ\x80\xc3\xa9";
  std::mt19937_64 rng(49);
  int compiled = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = grammars[rng() % grammars.size()];
    for (int edits = 1 + int(rng() % 3); edits > 0; --edits) {
      const size_t at = rng() % (text.size() + 1);
      switch (rng() % 4) {
        case 0: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 1: if (at < text.size()) text.erase(at, 1); break;
        case 2: if (at < text.size()) text[at] = alphabet[rng() % alphabet.size()]; break;
        default: {
          const std::string& other = grammars[rng() % grammars.size()];
          const size_t from = rng() % other.size();
          text.insert(at, other.substr(from, rng() % 40));
        }
      }
    }
    auto g = ParseGbnf(text);
    if (!g.ok()) {
      EXPECT_EQ(codes.count(g.status().code()), 1u) << g.status().code() << ": " << text;
      ++refused;
      continue;
    }
    ++compiled;
    GrammarPushdown m(std::move(*g));
    auto state = m.Start();
    if (!state.ok()) {
      EXPECT_EQ(state.status().code(), "grammar_state_limit");
      continue;
    }
    for (int k = 0; k < 64; ++k) {
      const uint8_t b = uint8_t(alphabet[rng() % alphabet.size()]);
      auto next = m.Advance(*state, b);
      if (!next.ok()) {
        EXPECT_EQ(next.status().code(), "grammar_state_limit");
        break;
      }
      if (next->dead()) continue;  // try another byte from the same state
      state = std::move(next);
    }
  }
  std::printf("3000 mutated grammars: %d compiled, %d refused by name\n", compiled, refused);
  EXPECT_GT(compiled, 100);
  EXPECT_GT(refused, 100);
}

TEST(GbnfGrammar, StackLimitsAreNamedErrors) {
  // Deep nesting: one frame per open parenthesis.
  auto g = ParseGbnf("root ::= \"(\" root \")\" | \"x\"");
  ASSERT_TRUE(g.ok());
  GrammarPushdown deep(std::move(*g));
  EXPECT_EQ(LabelBytes(deep, std::string(100, '(') + "x" + std::string(100, ')')), "accept");
  EXPECT_EQ(LabelBytes(deep, std::string(600, '(')), "limit");
  // Ambiguity: every split of a run of a's between two counted runs.
  g = ParseGbnf("root ::= \"a\"{0,1024} \"a\"{0,1024}");
  ASSERT_TRUE(g.ok());
  GrammarPushdown wide(std::move(*g));
  EXPECT_EQ(LabelBytes(wide, std::string(100, 'a')), "accept");
  EXPECT_EQ(LabelBytes(wide, std::string(1100, 'a')), "limit");
  // Right recursion and x* read any length in constant depth.
  g = ParseGbnf("root ::= item*\nitem ::= [a-z] | \" \"");
  ASSERT_TRUE(g.ok());
  GrammarPushdown flat(std::move(*g));
  EXPECT_EQ(LabelBytes(flat, std::string(5000, 'q')), "accept");
}

TEST(GbnfGrammar, ShortestCompletionCountsBytes) {
  auto g = ParseGbnf("root ::= \"ab\" tail\ntail ::= \"é\" | \"cdef\" | tail2\ntail2 ::= [x]{5}");
  ASSERT_TRUE(g.ok());
  GrammarPushdown m(std::move(*g));
  auto s = m.Start();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(m.ShortestCompletion(*s), 4);  // "ab" + the two bytes of é
  s = m.Advance(*s, 'a');
  s = m.Advance(*s, 'b');
  s = m.Advance(*s, 0xC3);  // half of é
  ASSERT_TRUE(s.ok() && !s->dead());
  EXPECT_EQ(m.ShortestCompletion(*s), 1);
  EXPECT_FALSE(m.Accepting(*s));
  s = m.Advance(*s, 0xA9);
  ASSERT_TRUE(s.ok() && !s->dead());
  EXPECT_TRUE(m.Complete(*s));
  // A lead byte no class can continue is refused at once.
  auto t = m.Start();
  t = m.Advance(*t, 'a');
  t = m.Advance(*t, 'b');
  t = m.Advance(*t, 0xD0);
  EXPECT_TRUE(t.ok() && t->dead());
}

// Uniform random choice among the allowed tokens with a tight budget: every
// walk ends in a sentence (checked by a fresh byte-by-byte machine), and a
// budget below the shortest sentence is the named grammar_no_room error.
TEST(GbnfGrammar, RandomWalksCloseWithinTheBudget) {
  std::unique_ptr<Tokenizer> tok;
  auto vocab = SmolVocab(&tok);
  if (vocab == nullptr) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not present (make model)";
  const int32_t eos = tok->eos_id();
  int walks = 0;
  for (const auto& g : Cases()) {
    const std::string name = g["grammar"];
    auto c = GrammarConstraint::Create(GrammarFile(name), vocab, {eos});
    ASSERT_TRUE(c.ok()) << c.status().message();
    const int64_t shortest = (*c)->machine().ShortestCompletion((*c)->start());
    for (int64_t budget : {shortest + 2, shortest + 24}) {
      for (uint64_t seed = 0; seed < 3; ++seed) {
        GrammarConstraintState state(*c);
        std::mt19937_64 rng(seed * 31 + uint64_t(budget));
        std::string text;
        bool ended = false;
        for (int64_t step = 0; step < budget && !ended; ++step) {
          std::vector<float> logits(size_t(tok->vocab_size()), 0.0f);
          const Status masked = state.ApplyMask(logits, budget - step);
          ASSERT_TRUE(masked.ok()) << name << " after '" << text << "': " << masked.message();
          std::vector<int32_t> allowed;
          for (size_t i = 0; i < logits.size(); ++i) {
            if (logits[i] == 0.0f) allowed.push_back(int32_t(i));
          }
          int32_t id = allowed[rng() % allowed.size()];
          if (state.CanEnd() && rng() % 3 == 0) id = eos;
          ASSERT_TRUE(state.Accept(id).ok());
          if (id == eos) break;
          text += vocab->piece(id);
          ended = state.IsComplete();
        }
        EXPECT_TRUE(state.CanEnd()) << name << ": '" << text << "'";
        EXPECT_EQ(LabelBytes((*c)->machine(), text), "accept") << name << ": '" << text << "'";
        ++walks;
      }
    }
    if (shortest > 1) {
      GrammarConstraintState state(*c);
      std::vector<float> logits(size_t(tok->vocab_size()), 0.0f);
      const Status st = state.ApplyMask(logits, 1);
      // One token may still spell a whole short sentence; when none does,
      // the error names the budget.
      if (!st.ok()) {
        EXPECT_EQ(st.code(), "grammar_no_room") << name;
      }
    }
  }
  std::printf("%d random walks closed within their budgets\n", walks);
}

// A state with a thousand live parses over a class nearly every token is
// in: the mask walk stops at kMaxMaskWork and the step fails by name.
TEST(GbnfGrammar, MaskWorkIsBounded) {
  std::unique_ptr<Tokenizer> tok;
  auto vocab = SmolVocab(&tok);
  if (vocab == nullptr) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not present (make model)";
  auto c = GrammarConstraint::Create("root ::= [^\\x00]{0,1024} [^\\x00]{0,1024}", vocab,
                                     {tok->eos_id()});
  ASSERT_TRUE(c.ok()) << c.status().message();
  GrammarConstraintState state(*c);
  ASSERT_TRUE(state.AcceptBytes(std::string(1000, 'a')).ok());
  std::vector<float> logits(size_t(tok->vocab_size()), 0.0f);
  const Status st = state.ApplyMask(logits, 64);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), "grammar_state_limit");
  // The same grammar early on (two parses) masks normally.
  GrammarConstraintState fresh(*c);
  EXPECT_TRUE(fresh.ApplyMask(logits, 64).ok());
}

TEST(GbnfGrammar, NoRoomIsANamedError) {
  std::unique_ptr<Tokenizer> tok;
  auto vocab = SmolVocab(&tok);
  if (vocab == nullptr) GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not present (make model)";
  auto c = GrammarConstraint::Create("root ::= [0-9]{40}", vocab, {tok->eos_id()});
  ASSERT_TRUE(c.ok());
  GrammarConstraintState state(*c);
  std::vector<float> logits(size_t(tok->vocab_size()), 0.0f);
  const Status st = state.ApplyMask(logits, 10);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), "grammar_no_room");
  EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace anymoe
