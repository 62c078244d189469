// Tokenizer::FromTiktokenFolder: a tiktoken-style HF folder (Kimi K2 / K2.5)
// as a byte-level BPE. tiktoken merges, in a piece, the adjacent pair whose
// concatenation has the lowest rank, after taking a piece found whole in the
// vocabulary as one token. That is BPE with ignore_merges and, as merges,
// every split of every token into two tokens, ranked by the token's rank; so
// the loader derives those merges and the ordinary BPE model runs it.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/mapped_file.h"
#include "formats/parse_util.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxTiktokenFileBytes = size_t{64} << 20;  // Kimi's is 2.7 MB
constexpr size_t kMaxConfigBytes = size_t{16} << 20;
constexpr size_t kMaxSourceBytes = size_t{1} << 20;
// tokenization_kimi.py's num_reserved_special_tokens: ids [base, base + 256)
// are special tokens, named by added_tokens_decoder or <|reserved_token_ID|>.
constexpr int32_t kDefaultReservedSpecials = 256;

Status Malformed(const std::string& path, const std::string& what) {
  return Status::Error(path + ": " + what, ErrorKind::kInvalidArgument, "tiktoken_model_malformed");
}

// Standard base64 with '=' padding; false on any other character or length.
bool DecodeBase64(std::string_view in, std::string* out) {
  if (in.size() % 4 != 0) return false;
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '+') {
      v = 62;
    } else if (c == '/') {
      v = 63;
    } else if (c == '=' && i + 2 >= in.size()) {
      // Padding only at the end, and nothing but padding after it.
      if (i + 1 < in.size() && in[i + 1] != '=') return false;
      return true;
    } else {
      return false;
    }
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xFF));
    }
  }
  return true;
}

// The "base64 rank" lines of tiktoken.model: ranks[i] = bytes of token i. The
// ranks must be exactly 0..n-1 (every real file numbers them so): they are the ids.
Expected<std::vector<std::string>> ReadRanks(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return Malformed(path, "cannot open");
  if ((*file)->size() > kMaxTiktokenFileBytes) {
    return Malformed(path, "size " + std::to_string((*file)->size()) + " exceeds the limit of " +
                               std::to_string(kMaxTiktokenFileBytes) + " bytes");
  }
  const std::string_view text(reinterpret_cast<const char*>((*file)->data()), (*file)->size());
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  size_t line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = "line " + std::to_string(line_no);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos) {
      return Malformed(path, where + " is not 'BASE64 RANK'");
    }
    const std::string_view rank_text = line.substr(space + 1);
    int64_t rank = -1;
    const auto [ptr, ec] =
        std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || ptr != rank_text.data() + rank_text.size() || rank < 0 ||
        rank >= kMaxVocabTokens) {
      return Malformed(path, where + ": rank '" + std::string(rank_text.substr(0, 20)) +
                                 "' is not an integer in [0, " + std::to_string(kMaxVocabTokens) +
                                 ")");
    }
    if (space > 4 * ((kMaxTokenBytes + 2) / 3)) {
      return Malformed(path,
                       where + ": token longer than " + std::to_string(kMaxTokenBytes) + " bytes");
    }
    std::string bytes;
    if (!DecodeBase64(line.substr(0, space), &bytes) || bytes.empty()) {
      return Malformed(path, where + ": token is not non-empty base64");
    }
    if (size_t(rank) >= tokens.size()) {
      if (size_t(rank) >= 2 * (line_no + 1024)) {
        return Malformed(
            path, where + ": rank " + std::to_string(rank) + " leaves most ids before it unused");
      }
      tokens.resize(size_t(rank) + 1);
      seen.resize(size_t(rank) + 1);
    }
    if (seen[size_t(rank)])
      return Malformed(path, where + ": rank " + std::to_string(rank) + " repeats");
    seen[size_t(rank)] = true;
    tokens[size_t(rank)] = std::move(bytes);
  }
  if (tokens.empty()) return Malformed(path, "no tokens");
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r]) return Malformed(path, "rank " + std::to_string(r) + " is missing");
  }
  return tokens;
}

// pat_str of tokenization_kimi.py: `pat_str = "|".join([r"""...""", ...])`.
// Empty when the file does not exist.
Expected<std::string> ReadKimiPattern(const std::string& path, int32_t* reserved) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  std::string src(kMaxSourceBytes + 1, '\0');
  in.read(src.data(), std::streamsize(src.size()));
  src.resize(size_t(in.gcount()));
  if (src.size() > kMaxSourceBytes) return Malformed(path, "larger than 1 MiB");
  const auto fail = [&](const std::string& what) {
    return Status::Error(path + ": " + what, ErrorKind::kInvalidArgument,
                         "tokenizer_regex_rejected");
  };
  const size_t reserved_at = src.find("num_reserved_special_tokens = ");
  if (reserved_at != std::string::npos) {
    const char* begin = src.data() + reserved_at + 30;
    std::from_chars(begin, src.data() + src.size(), *reserved);
    if (*reserved < 0 || *reserved > 4096) return fail("num_reserved_special_tokens out of range");
  }
  const size_t start = src.find("pat_str = \"|\".join(");
  if (start == std::string::npos) return fail("no pat_str = \"|\".join([...]) to read");
  // The list's r"""...""" parts, up to the ']' that closes it (a part may hold "])").
  std::string pattern;
  size_t at = src.find('[', start);
  while (at != std::string::npos) {
    at = src.find_first_not_of(" \t\r\n,[", at);
    if (at == std::string::npos || src.compare(at, 4, "r\"\"\"") != 0) break;
    const size_t close = src.find("\"\"\"", at + 4);
    if (close == std::string::npos) return fail("unterminated r\"\"\" string");
    if (!pattern.empty()) pattern += '|';
    pattern += src.substr(at + 4, close - at - 4);
    at = close + 3;
  }
  if (at == std::string::npos || src[at] != ']') return fail("pat_str's list is not closed");
  if (pattern.empty()) return fail("pat_str has no r\"\"\"...\"\"\" parts");
  return pattern;
}

// Every split of every token into two tokens, ranked by the token they make
// (tiktoken's merge priority): the splits of one token share its rank, so
// where two of them compete in a piece the leftmost merges, as in tiktoken's
// min-rank scan, not the one listed first. (A random search over 40,000 small
// vocabularies, 1.2M words, found no piece that reaches such a contest; this
// makes the rule tiktoken's by construction rather than by that search.)
std::vector<BpeModel::Merge> MergesFromRanks(const std::vector<std::string>& tokens) {
  std::unordered_map<std::string_view, int32_t> id_of;
  id_of.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], int32_t(i));
  std::vector<BpeModel::Merge> merges;
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    const std::string_view whole(tokens[rank]);
    for (size_t k = 1; k < whole.size(); ++k) {
      if (id_of.count(whole.substr(0, k)) && id_of.count(whole.substr(k))) {
        merges.push_back({ByteLevelEncode(whole.substr(0, k)), ByteLevelEncode(whole.substr(k)),
                          int32_t(rank)});
      }
    }
  }
  return merges;
}

// added_tokens_decoder of tokenizer_config.json: id -> {content, special, ...}.
Status ReadAddedTokens(const std::string& path, int32_t base, int32_t reserved,
                       TokenizerSpec* spec) {
  std::map<int32_t, AddedToken> added;
  if (!path.empty()) {
    JsonLimits limits;
    limits.reject_duplicate_keys = false;
    ASSIGN_OR_RETURN(Json config, ReadJsonFile(path, kMaxConfigBytes, limits));
    auto decoder = config.find("added_tokens_decoder");
    if (decoder != config.end() && decoder->is_object()) {
      for (const auto& [key, entry] : decoder->items()) {
        int32_t id = -1;
        const auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
        if (ec != std::errc() || ptr != key.data() + key.size() || id < base ||
            id >= base + std::max(reserved, 0) + 1024 || !entry.is_object() ||
            !entry.contains("content") || !entry["content"].is_string()) {
          return Status::Error(path + ": added_tokens_decoder entry '" + key.substr(0, 20) +
                               "' is not {content} at an id from " + std::to_string(base) +
                               " (the first after tiktoken.model's ranks)");
        }
        AddedToken t;
        t.id = id;
        t.content = entry["content"].get<std::string>();
        t.special = !entry.contains("special") || entry.value("special", true);
        t.lstrip = entry.value("lstrip", false);
        t.rstrip = entry.value("rstrip", false);
        t.single_word = entry.value("single_word", false);
        if (t.content.empty()) return Status::Error(path + ": empty added token " + key);
        added[id] = std::move(t);
      }
    }
  }
  for (int32_t id = base; id < base + reserved; ++id) {
    if (added.count(id)) continue;
    AddedToken t;
    t.id = id;
    t.content = "<|reserved_token_" + std::to_string(id) + "|>";
    t.special = true;
    added[id] = std::move(t);
  }
  const int32_t last = added.empty() ? base - 1 : added.rbegin()->first;
  spec->token_texts.resize(size_t(last) + 1);
  spec->kinds.resize(size_t(last) + 1, TokenKind::kUnused);
  for (auto& [id, t] : added) {
    spec->token_texts[size_t(id)] = t.content;
    spec->kinds[size_t(id)] = t.special ? TokenKind::kSpecial : TokenKind::kAdded;
    spec->added.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::FromTiktokenFolder(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string model_path = (fs::path(dir) / "tiktoken.model").string();
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();
  const std::string code_path = (fs::path(dir) / "tokenization_kimi.py").string();
  TokenizerSpec spec;
  spec.source = model_path;
  try {
    ASSIGN_OR_RETURN(std::vector<std::string> tokens, ReadRanks(model_path));
    int32_t reserved = kDefaultReservedSpecials;
    ASSIGN_OR_RETURN(std::string pattern, ReadKimiPattern(code_path, &reserved));
    if (pattern.empty()) {
      ASSIGN_OR_RETURN(std::vector<PreTokenizerStage> kimi,
                       PreTokenizerStagesForGgufName("kimi-k2"));
      spec.pre_stages = std::move(kimi);
    } else {
      spec.pre_stages = {PreTokenizerStage::Split(std::move(pattern))};
    }
    spec.pre = PreTokenizerKind::kRegex;
    spec.ignore_merges = true;
    spec.merges = MergesFromRanks(tokens);
    const int32_t base = int32_t(tokens.size());
    for (int32_t id = 0; id < base; ++id) {
      spec.token_texts.push_back(ByteLevelEncode(tokens[size_t(id)]));
      spec.kinds.push_back(TokenKind::kNormal);
      spec.bpe_ids.push_back(id);
    }
    std::vector<std::string>().swap(tokens);
    const bool has_config = fs::exists(config_path);
    RETURN_IF_ERROR(ReadAddedTokens(has_config ? config_path : "", base, reserved, &spec));
    if (has_config) RETURN_IF_ERROR(ReadHfTokenizerConfig(config_path, &spec));
  } catch (const std::exception& e) {  // nlohmann type errors on malformed input
    return Status::Error(dir + ": malformed tokenizer files: " + e.what());
  }
  return Create(std::move(spec));
}

}  // namespace anymoe
