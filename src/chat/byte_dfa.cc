// Byte automata (byte_dfa.h): UTF-8 range splitting, subset construction,
// product, and the trim that leaves only states that can still accept.
#include "chat/byte_dfa.h"

#include <algorithm>
#include <deque>
#include <map>

namespace anymoe {
namespace {

int Utf8Length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void EncodeUtf8(uint32_t cp, uint8_t* out) {
  const int n = Utf8Length(cp);
  if (n == 1) {
    out[0] = uint8_t(cp);
    return;
  }
  static const uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = uint8_t(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = uint8_t(kLead[n] | cp);
}

// Keeps the states reachable from `start` that can reach acceptance, renumbers
// them, and fills distances and the shortest text. `what` names the language
// for the error when it is empty.
Expected<ByteDfa> Trim(const std::vector<int32_t>& next, const std::vector<uint8_t>& accepting, int32_t start) {
  const size_t n = accepting.size();
  std::vector<std::vector<int32_t>> reverse(n);
  for (size_t s = 0; s < n; ++s) {
    for (int b = 0; b < 256; ++b) {
      const int32_t t = next[s * 256 + size_t(b)];
      if (t >= 0) reverse[size_t(t)].push_back(int32_t(s));
    }
  }
  std::vector<int32_t> dist(n, -1);
  std::deque<int32_t> queue;
  for (size_t s = 0; s < n; ++s) {
    if (accepting[s]) dist[s] = 0, queue.push_back(int32_t(s));
  }
  while (!queue.empty()) {
    const int32_t s = queue.front();
    queue.pop_front();
    for (int32_t p : reverse[size_t(s)]) {
      if (dist[size_t(p)] < 0) dist[size_t(p)] = dist[size_t(s)] + 1, queue.push_back(p);
    }
  }
  if (dist[size_t(start)] < 0) return Status::Error("no text matches");
  // Renumber the live states reachable from start, in breadth-first order.
  std::vector<int32_t> id(n, -1);
  std::vector<int32_t> order = {start};
  id[size_t(start)] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      const int32_t t = next[size_t(order[i]) * 256 + size_t(b)];
      if (t >= 0 && dist[size_t(t)] >= 0 && id[size_t(t)] < 0) {
        id[size_t(t)] = int32_t(order.size());
        order.push_back(t);
      }
    }
  }
  ByteDfa d;
  d.next.assign(order.size() * 256, ByteDfa::kNone);
  d.accepting.resize(order.size());
  d.distance.resize(order.size());
  d.has_next.assign(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t s = size_t(order[i]);
    d.accepting[i] = accepting[s];
    d.distance[i] = dist[s];
    for (int b = 0; b < 256; ++b) {
      const int32_t t = next[s * 256 + size_t(b)];
      if (t >= 0 && id[size_t(t)] >= 0) {
        d.next[i * 256 + size_t(b)] = id[size_t(t)];
        d.has_next[i] = 1;
      }
    }
  }
  d.start = 0;
  for (int32_t s = 0; !d.accepting[size_t(s)];) {
    for (int b = 0; b < 256; ++b) {
      const int32_t t = d.Next(s, uint8_t(b));
      if (t >= 0 && d.distance[size_t(t)] == d.distance[size_t(s)] - 1) {
        d.shortest += char(b);
        s = t;
        break;
      }
    }
  }
  return d;
}

}  // namespace

int32_t ByteNfa::AddState() {
  states_.emplace_back();
  return int32_t(states_.size() - 1);
}

void ByteNfa::AddEpsilon(int32_t from, int32_t to) { states_[size_t(from)].epsilon.push_back(to); }

void ByteNfa::AddBytes(int32_t from, int32_t to, uint8_t lo, uint8_t hi) {
  states_[size_t(from)].edges.push_back({lo, hi, to});
}

void ByteNfa::AddCodePoints(int32_t from, int32_t to, uint32_t lo, uint32_t hi) {
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // no surrogates in UTF-8
    if (lo < 0xD800) AddCodePoints(from, to, lo, 0xD7FF);
    if (hi > 0xDFFF) AddCodePoints(from, to, 0xE000, hi);
    return;
  }
  for (uint32_t limit : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= limit && hi > limit) {
      AddCodePoints(from, to, lo, limit);
      AddCodePoints(from, to, limit + 1, hi);
      return;
    }
  }
  AddSameLength(from, to, lo, hi);
}

// [lo, hi] of one encoded length, split until every byte position is a plain range.
void ByteNfa::AddSameLength(int32_t from, int32_t to, uint32_t lo, uint32_t hi) {
  const int n = Utf8Length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        AddSameLength(from, to, lo, lo | m);
        AddSameLength(from, to, (lo | m) + 1, hi);
        return;
      }
      if ((hi & m) != m) {
        AddSameLength(from, to, lo, (hi & ~m) - 1);
        AddSameLength(from, to, hi & ~m, hi);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  EncodeUtf8(lo, a);
  EncodeUtf8(hi, b);
  int32_t s = from;
  for (int k = 0; k < n; ++k) {
    const int32_t t = k == n - 1 ? to : AddState();
    AddBytes(s, t, a[k], b[k]);
    s = t;
  }
}

bool ByteDfa::Matches(const std::string& text) const {
  int32_t s = start;
  for (char c : text) {
    s = Next(s, uint8_t(c));
    if (s < 0) return false;
  }
  return accepting[size_t(s)] != 0;
}

Expected<ByteDfa> Determinize(const ByteNfa& nfa, int32_t start, int32_t accept, size_t max_states) {
  const auto& states = nfa.states();
  std::vector<int32_t> mark(states.size(), -1);
  int32_t stamp = 0;
  const auto closure = [&](std::vector<int32_t> set) {
    ++stamp;
    for (int32_t s : set) mark[size_t(s)] = stamp;
    for (size_t i = 0; i < set.size(); ++i) {
      for (int32_t t : states[size_t(set[i])].epsilon) {
        if (mark[size_t(t)] != stamp) mark[size_t(t)] = stamp, set.push_back(t);
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  };
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> sets;
  std::vector<int32_t> next;
  std::vector<uint8_t> accepting;
  const auto intern = [&](std::vector<int32_t> set) -> int32_t {
    auto [it, fresh] = ids.emplace(std::move(set), int32_t(sets.size()));
    if (fresh) {
      sets.push_back(it->first);
      next.resize(next.size() + 256, ByteDfa::kNone);
      accepting.push_back(std::binary_search(it->first.begin(), it->first.end(), accept) ? 1 : 0);
    }
    return it->second;
  };
  intern(closure({start}));
  std::vector<std::vector<int32_t>> targets(256);
  for (size_t i = 0; i < sets.size(); ++i) {
    if (sets.size() > max_states) {
      return Status::Error("needs more than " + std::to_string(max_states) + " automaton states");
    }
    for (auto& t : targets) t.clear();
    for (int32_t s : sets[i]) {
      for (const ByteNfa::Edge& e : states[size_t(s)].edges) {
        for (int b = e.lo; b <= e.hi; ++b) targets[size_t(b)].push_back(e.to);
      }
    }
    for (int b = 0; b < 256; ++b) {
      if (targets[size_t(b)].empty()) continue;
      const int32_t t = intern(closure(targets[size_t(b)]));
      next[i * 256 + size_t(b)] = t;
    }
  }
  return Trim(next, accepting, 0);
}

Expected<ByteDfa> Intersect(const ByteDfa& a, const ByteDfa& b, size_t max_states) {
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  std::vector<int32_t> next;
  std::vector<uint8_t> accepting;
  const auto intern = [&](int32_t x, int32_t y) {
    auto [it, fresh] = ids.emplace(std::make_pair(x, y), int32_t(pairs.size()));
    if (fresh) {
      pairs.emplace_back(x, y);
      next.resize(next.size() + 256, ByteDfa::kNone);
      accepting.push_back(a.accepting[size_t(x)] && b.accepting[size_t(y)] ? 1 : 0);
    }
    return it->second;
  };
  intern(a.start, b.start);
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs.size() > max_states) {
      return Status::Error("needs more than " + std::to_string(max_states) + " automaton states");
    }
    const auto [x, y] = pairs[i];
    for (int c = 0; c < 256; ++c) {
      const int32_t nx = a.Next(x, uint8_t(c)), ny = b.Next(y, uint8_t(c));
      if (nx >= 0 && ny >= 0) {
        const int32_t t = intern(nx, ny);
        next[i * 256 + size_t(c)] = t;
      }
    }
  }
  return Trim(next, accepting, 0);
}

Expected<ByteDfa> CodePointRange(int64_t min_chars, int64_t max_chars, size_t max_states) {
  // State s: s code points read; the last state absorbs when unbounded.
  const int64_t top = max_chars < 0 ? min_chars : max_chars;
  if (top + 1 > int64_t(max_states)) {
    return Status::Error("needs more than " + std::to_string(max_states) + " automaton states");
  }
  const size_t n = size_t(top) + 1;
  ByteDfa d;
  d.next.assign(n * 256, ByteDfa::kNone);
  d.accepting.assign(n, 0);
  d.distance.resize(n);
  d.has_next.assign(n, 0);
  for (size_t s = 0; s < n; ++s) {
    d.accepting[s] = int64_t(s) >= min_chars;
    d.distance[s] = int32_t(std::max<int64_t>(0, min_chars - int64_t(s)));
    for (int b = 0; b < 256; ++b) {
      const bool continuation = (b & 0xC0) == 0x80;
      size_t t = s + 1;
      if (continuation) t = s;
      else if (s + 1 == n) t = max_chars < 0 ? s : n;  // n: past maxLength
      if (t < n) d.next[s * 256 + size_t(b)] = int32_t(t), d.has_next[s] = 1;
    }
  }
  d.shortest.assign(size_t(min_chars), 'a');
  return d;
}

}  // namespace anymoe
