// The GBNF pushdown machine (grammar_pushdown.h). A rule reference at the end
// of its alternative replaces the caller's frame instead of stacking a
// continuation, so right recursion (lists, `x*`) reads any length in constant
// depth; stacks met twice in one expansion are dropped, which ends the cycles
// nullable repetitions make.
#include "chat/grammar_pushdown.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <set>

namespace anymoe {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

int64_t AddCost(int64_t a, int64_t b) { return std::min(kInf, a + b); }

Status StateLimit(const std::string& what) {
  return Status::Error(what + "; the grammar is too ambiguous or too deeply nested",
                       ErrorKind::kInvalidArgument, "grammar_state_limit", "grammar");
}

// UTF-8 lengths' code point ranges.
constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxOfLength[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

}  // namespace

GrammarPushdown::GrammarPushdown(GbnfGrammar grammar, GrammarMachineLimits limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  const GbnfGrammar& g = grammar_;
  const auto char_cost = [&](const GbnfElement& e) -> int64_t {
    for (int len = 1; len <= 4; ++len) {
      if (g.MatchesSome(e, kMinOfLength[len], kMaxOfLength[len])) return len;
    }
    return kInf;
  };
  // Shortest derivation per rule (Knuth's generalisation of Dijkstra): an
  // alternative's length is known once all the rules it references are.
  struct Alt {
    uint32_t rule;
    int64_t sum = 0;
    uint32_t pending = 0;
  };
  const size_t n = g.alternatives.size();
  std::vector<Alt> alts;
  std::vector<std::vector<uint32_t>> uses(n);
  std::vector<int64_t> rule_min(n, kInf);
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t start : g.alternatives[r]) {
      Alt a{r};
      for (uint32_t p = start; g.elements[p].kind != GbnfElement::Kind::kEnd; ++p) {
        const GbnfElement& e = g.elements[p];
        if (e.kind == GbnfElement::Kind::kChars) {
          a.sum = AddCost(a.sum, char_cost(e));
        } else {
          ++a.pending;
          uses[e.rule].push_back(uint32_t(alts.size()));
        }
      }
      alts.push_back(a);
    }
  }
  using Item = std::pair<int64_t, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (const Alt& a : alts) {
    if (a.pending == 0) queue.push({a.sum, a.rule});
  }
  std::vector<bool> done(n, false);
  while (!queue.empty()) {
    const auto [value, r] = queue.top();
    queue.pop();
    if (done[r]) continue;
    done[r] = true;
    rule_min[r] = value;
    for (uint32_t i : uses[r]) {
      alts[i].sum = AddCost(alts[i].sum, value);
      if (--alts[i].pending == 0) queue.push({alts[i].sum, alts[i].rule});
    }
  }
  suffix_.assign(g.elements.size(), 0);
  for (size_t p = g.elements.size(); p-- > 0;) {
    const GbnfElement& e = g.elements[p];
    if (e.kind == GbnfElement::Kind::kEnd) continue;
    const int64_t cost = e.kind == GbnfElement::Kind::kChars ? char_cost(e) : rule_min[e.rule];
    suffix_[p] = AddCost(cost, suffix_[p + 1]);
  }
}

Status GrammarPushdown::Expand(std::vector<GrammarStack> work, std::vector<GrammarStack>* out) const {
  const GbnfGrammar& g = grammar_;
  std::set<GrammarStack> seen;
  const size_t max_seen = limits_.max_stacks * 8;
  while (!work.empty()) {
    GrammarStack s = std::move(work.back());
    work.pop_back();
    if (seen.count(s) != 0) continue;
    if (seen.size() >= max_seen) {
      return StateLimit("expanding the grammar visits more than " + std::to_string(max_seen) + " stacks");
    }
    seen.insert(s);
    if (s.empty()) {
      out->push_back(std::move(s));
      continue;
    }
    const uint32_t p = s.back();
    const GbnfElement& e = g.elements[p];
    switch (e.kind) {
      case GbnfElement::Kind::kChars:
        out->push_back(std::move(s));
        break;
      case GbnfElement::Kind::kEnd:
        s.pop_back();
        work.push_back(std::move(s));
        break;
      case GbnfElement::Kind::kRule: {
        if (g.elements[p + 1].kind == GbnfElement::Kind::kEnd) {
          s.pop_back();  // tail reference: nothing to come back to
        } else {
          s.back() = p + 1;
        }
        if (s.size() + 1 > limits_.max_depth) {
          return StateLimit("a stack deeper than " + std::to_string(limits_.max_depth) + " rules");
        }
        for (uint32_t start : g.alternatives[e.rule]) {
          GrammarStack t = s;
          t.push_back(start);
          work.push_back(std::move(t));
        }
        break;
      }
    }
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  if (out->size() > limits_.max_stacks) {
    return StateLimit("more than " + std::to_string(limits_.max_stacks) + " parses at once");
  }
  return Status::Ok();
}

Expected<GrammarState> GrammarPushdown::Start() const {
  std::vector<GrammarStack> seeds;
  for (uint32_t start : grammar_.alternatives[grammar_.root]) seeds.push_back({start});
  GrammarState state;
  RETURN_IF_ERROR(Expand(std::move(seeds), &state.stacks));
  return state;
}

Expected<GrammarState> GrammarPushdown::AdvanceCodePoint(const GrammarState& state, uint32_t cp) const {
  std::vector<GrammarStack> seeds;
  for (const GrammarStack& s : state.stacks) {
    if (s.empty() || !grammar_.Matches(grammar_.elements[s.back()], cp)) continue;
    GrammarStack t = s;
    ++t.back();
    seeds.push_back(std::move(t));
  }
  GrammarState next;
  if (seeds.empty()) return next;
  RETURN_IF_ERROR(Expand(std::move(seeds), &next.stacks));
  return next;
}

void GrammarPushdown::PartialRange(const GrammarState& state, uint32_t* lo, uint32_t* hi) const {
  const uint32_t free_bits = 6u * state.need;
  *lo = std::max(state.partial << free_bits, kMinOfLength[state.length]);
  *hi = std::min((state.partial << free_bits) | ((1u << free_bits) - 1), kMaxOfLength[state.length]);
  // Surrogates are not code points of UTF-8.
  if (*lo >= 0xD800 && *hi <= 0xDFFF) *hi = *lo - 1;
}

bool GrammarPushdown::TopMatchesSome(const GrammarStack& stack, uint32_t lo, uint32_t hi) const {
  return !stack.empty() && grammar_.MatchesSome(grammar_.elements[stack.back()], lo, hi);
}

Expected<GrammarState> GrammarPushdown::Advance(const GrammarState& state, uint8_t byte) const {
  GrammarState next;
  if (state.need == 0) {
    if (byte < 0x80) return AdvanceCodePoint(state, byte);
    if (byte >= 0xC2 && byte <= 0xDF) {
      next.length = 2;
      next.partial = byte & 0x1F;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      next.length = 3;
      next.partial = byte & 0x0F;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      next.length = 4;
      next.partial = byte & 0x07;
    } else {
      return next;  // not a UTF-8 lead byte
    }
    next.need = uint8_t(next.length - 1);
  } else {
    if ((byte & 0xC0) != 0x80) return next;
    next.length = state.length;
    next.partial = state.partial << 6 | (byte & 0x3F);
    next.need = uint8_t(state.need - 1);
  }
  uint32_t lo, hi;
  PartialRange(next, &lo, &hi);
  if (lo > hi) return GrammarState{};
  if (next.need == 0) {
    GrammarState whole;
    whole.stacks = state.stacks;
    return AdvanceCodePoint(whole, next.partial);
  }
  // Keep the parses whose next character may still be this code point.
  for (const GrammarStack& s : state.stacks) {
    if (TopMatchesSome(s, lo, hi)) next.stacks.push_back(s);
  }
  if (next.stacks.empty()) return GrammarState{};
  return next;
}

bool GrammarPushdown::Accepting(const GrammarState& state) const {
  return state.need == 0 && !state.stacks.empty() && state.stacks.front().empty();
}

bool GrammarPushdown::Complete(const GrammarState& state) const {
  return Accepting(state) && state.stacks.size() == 1;
}

int64_t GrammarPushdown::ShortestCompletion(const GrammarState& state) const {
  int64_t best = std::numeric_limits<int64_t>::max();
  for (const GrammarStack& s : state.stacks) {
    int64_t cost = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      // The top's character is the one being read when a sequence is begun.
      const bool reading = state.need > 0 && i + 1 == s.size();
      cost = AddCost(cost, reading ? state.need + suffix_[s[i] + 1] : suffix_[s[i]]);
    }
    best = std::min(best, cost);
  }
  return best >= kInf ? std::numeric_limits<int64_t>::max() : best;
}

std::string GrammarPushdown::Key(const GrammarState& state) const {
  std::string key;
  key.reserve(8 + state.stacks.size() * 16);
  const auto put = [&key](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(state.partial);
  put(uint32_t(state.need) << 8 | state.length);
  for (const GrammarStack& s : state.stacks) {
    put(uint32_t(s.size()));
    for (uint32_t p : s) put(p);
  }
  return key;
}

}  // namespace anymoe
