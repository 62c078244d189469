#include "loadgen/workload.h"

#include <cmath>
#include <random>

namespace anymoe {
namespace {

constexpr const char* kWords[] = {
    "the",    "of",     "and",    "to",     "in",      "is",      "was",    "that",    "for",
    "on",     "with",   "as",     "by",     "at",      "from",    "his",    "her",     "they",
    "this",   "which",  "or",     "an",     "were",    "are",     "be",     "has",     "had",
    "one",    "first",  "new",    "after",  "also",    "two",     "their",  "time",    "other",
    "year",   "city",   "school", "world",  "state",   "people",  "music",  "water",   "house",
    "river",  "light",  "road",   "book",   "game",    "team",    "film",   "war",     "life",
    "part",   "work",   "day",    "song",   "name",    "number",  "group",  "family",  "church",
    "system", "area",   "line",   "place",  "stone",   "way",     "home",   "power",   "north",
    "south",  "east",   "west",   "small",  "large",   "long",    "high",   "old",     "young",
    "good",   "great",  "early",  "late",   "local",   "public",  "major",  "little",  "black",
    "white",  "red",    "green",  "blue",   "open",    "free",    "full",   "hard",    "best",
    "made",   "used",   "known",  "found",  "called",  "began",   "played", "built",   "moved",
    "said",   "held",   "won",    "left",   "took",    "gave",    "told",   "saw",     "came",
    "went",   "back",   "down",   "over",   "under",   "about",   "into",   "between", "during",
    "before", "while",  "where",  "when",   "there",   "then",    "than",   "more",    "most",
    "some",   "many",   "each",   "such",   "only",    "very",    "still",  "even",    "well",
    "harbor", "market", "table",  "window", "garden",  "letter",  "story",  "paper",   "field",
    "island", "valley", "forest", "bridge", "station", "village", "street", "country", "season",
};
constexpr size_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

}  // namespace

std::vector<std::string> RandomPrompts(int count, int words, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> prompts;
  prompts.reserve(size_t(std::max(count, 0)));
  for (int i = 0; i < count; ++i) {
    std::string p;
    for (int w = 0; w < words; ++w) {
      if (w > 0) p += ' ';
      p += kWords[rng() % kWordCount];
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

std::vector<double> PoissonArrivals(int count, double rate, uint64_t seed) {
  std::vector<double> at(size_t(std::max(count, 0)), 0.0);
  if (!(rate > 0) || std::isinf(rate)) return at;
  // Inverse-CDF sampling from our own uniform draw, so the schedule does not
  // depend on the standard library's distribution implementation.
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  double t = 0;
  for (double& a : at) {
    const double u = (double(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0, 1)
    t += -std::log(u) / rate;
    a = t;
  }
  return at;
}

}  // namespace anymoe
