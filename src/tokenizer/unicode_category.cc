// Lookup in the generated category table (unicode_category_table.inc) and the
// property-name -> code-point-set mapping of the regex translator.
#include "tokenizer/unicode_category.h"

#include <algorithm>
#include <array>
#include <string>

namespace anymoe {
namespace {

struct CategoryRun {
  uint32_t first;
  uint32_t last;
  GeneralCategory category;
};

#include "tokenizer/unicode_category_table.inc"

constexpr std::array<std::string_view, 29> kCategoryNames = {
    "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn"};

struct LongName {
  std::string_view long_name;
  std::string_view short_name;
};

// Unicode's long property value aliases for the names patterns use.
constexpr LongName kLongNames[] = {
    {"Letter", "L"},
    {"Uppercase_Letter", "Lu"},
    {"Lowercase_Letter", "Ll"},
    {"Titlecase_Letter", "Lt"},
    {"Modifier_Letter", "Lm"},
    {"Other_Letter", "Lo"},
    {"Mark", "M"},
    {"Number", "N"},
    {"Decimal_Number", "Nd"},
    {"Punctuation", "P"},
    {"Symbol", "S"},
    {"Separator", "Z"},
    {"Other", "C"},
    {"Cased_Letter", "LC"},
    {"Space", "White_Space"},
    {"Hani", "Han"},
};

// The categories whose code name starts with `major` (L, M, N, P, S, Z, C), or the
// one named exactly; LC / L& are the cased letters.
std::vector<GeneralCategory> CategoriesNamed(std::string_view name) {
  std::vector<GeneralCategory> out;
  if (name == "LC" || name == "L&") {
    return {GeneralCategory::kLu, GeneralCategory::kLl, GeneralCategory::kLt};
  }
  for (size_t i = 0; i < kCategoryNames.size(); ++i) {
    const std::string_view cat = kCategoryNames[i];
    if (cat == name || (name.size() == 1 && cat[0] == name[0])) {
      out.push_back(static_cast<GeneralCategory>(i));
    }
  }
  return out;
}

template <size_t N>
std::vector<CodepointRange> Copy(const CodepointRange (&table)[N]) {
  return std::vector<CodepointRange>(std::begin(table), std::end(table));
}

}  // namespace

GeneralCategory GeneralCategoryOf(uint32_t cp) {
  auto it = std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), cp,
                             [](uint32_t v, const CategoryRun& r) { return v < r.first; });
  if (it == std::begin(kCategoryRuns)) return GeneralCategory::kCn;
  --it;
  return cp <= it->last ? it->category : GeneralCategory::kCn;
}

void NormalizeRanges(std::vector<CodepointRange>* ranges) {
  std::sort(ranges->begin(), ranges->end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.first < b.first; });
  std::vector<CodepointRange> merged;
  for (const CodepointRange& r : *ranges) {
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  *ranges = std::move(merged);
}

std::vector<CodepointRange> ComplementRanges(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  const auto add = [&out](uint32_t first, uint32_t last) {
    // Surrogates are no scalar values: PCRE2 rejects them in a UTF-8 class.
    if (first <= 0xDFFF && last >= 0xD800) {
      if (first < 0xD800) out.push_back({first, 0xD7FF});
      if (last > 0xDFFF) out.push_back({0xE000, last});
      return;
    }
    out.push_back({first, last});
  };
  for (const CodepointRange& r : ranges) {
    if (r.first > next) add(next, r.first - 1);
    next = r.last + 1;
  }
  if (next <= 0x10FFFF) add(next, 0x10FFFF);
  return out;
}

Expected<std::vector<CodepointRange>> PropertyRanges(std::string_view name) {
  for (const LongName& alias : kLongNames) {
    if (alias.long_name == name) name = alias.short_name;
  }
  if (name == "White_Space") return Copy(kWhiteSpaceRuns);
  if (name == "Han") return Copy(kHanRuns);
  if (name == "Word") return Copy(kWordRuns);
  if (name == "Any") return std::vector<CodepointRange>{{0, 0xD7FF}, {0xE000, 0x10FFFF}};
  const std::vector<GeneralCategory> cats = CategoriesNamed(name);
  if (cats.empty()) {
    return Status::Error("unknown Unicode property \\p{" + std::string(name) +
                         "}; known: general categories (L, Lu, ..., Co), White_Space, Han, Any");
  }
  const bool with_unassigned =
      std::find(cats.begin(), cats.end(), GeneralCategory::kCn) != cats.end();
  std::vector<CodepointRange> out;
  for (const CategoryRun& run : kCategoryRuns) {
    if (std::find(cats.begin(), cats.end(), run.category) != cats.end()) {
      out.push_back({run.first, run.last});
    }
  }
  if (with_unassigned) {
    std::vector<CodepointRange> assigned;
    for (const CategoryRun& run : kCategoryRuns) assigned.push_back({run.first, run.last});
    NormalizeRanges(&assigned);
    for (const CodepointRange& r : ComplementRanges(assigned)) out.push_back(r);
  }
  NormalizeRanges(&out);
  return out;
}

}  // namespace anymoe
