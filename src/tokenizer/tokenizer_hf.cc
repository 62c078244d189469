// Tokenizer::FromHfJson: reads an HF tokenizer.json (and optionally its
// tokenizer_config.json) into a TokenizerSpec: byte-level BPE with any
// pre-tokenizer made of ByteLevel, Split (regex) and Digits; anything else is an
// error that names the field and lists what is supported. The vocabulary,
// merges and added tokens are streamed from the parser straight into the spec
// (JsonDomBuilder::StreamChildren), each entry checked as it arrives, so a
// file costs about what its tables cost, never a JSON tree of all of them.
#include <map>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "formats/parse_util.h"
#include "tokenizer/sentencepiece_loaders.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxJsonBytes = size_t{512} << 20;
constexpr int kMaxJsonDepth = 64;  // real tokenizer.json files nest about 6 deep
constexpr int64_t kMaxId = int64_t{1} << 24;
// Ids index tables sized by the largest one: they must be (nearly) dense.
// Real files number 0..n-1, sometimes with a few unused ids before the added
// tokens; the slack allows that, and no more.
constexpr int64_t kIdSlack = 1024;

Expected<std::unique_ptr<MappedFile>> OpenJson(const std::string& path) {
  auto file = MappedFile::Open(path);
  if (!file.ok()) return Status::Error(path + ": cannot open");
  if ((*file)->size() > kMaxJsonBytes) {
    return Status::Error(path + ": size " + std::to_string((*file)->size()) +
                         " exceeds the limit of " + std::to_string(kMaxJsonBytes) + " bytes");
  }
  return file;
}

std::string_view TextOf(const MappedFile& file) {
  return std::string_view(reinterpret_cast<const char*>(file.data()), file.size());
}

Expected<Json> ReadJson(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, OpenJson(path));
  // Depth is capped while parsing: copying or dumping a deeply nested value
  // recurses once per level and would overflow the stack (nlohmann/json #5387).
  JsonLimits limits;
  limits.max_depth = kMaxJsonDepth;
  limits.reject_duplicate_keys = false;  // as HF tokenizers, the last one wins
  auto json = ParseJsonStrict(TextOf(*file), path, limits);
  if (!json.ok()) return Status::Error("not valid JSON: " + json.status().message());
  return std::move(json).value();
}

bool BoolOr(const Json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_boolean()) ? it->get<bool>() : fallback;
}

std::string StringOr(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

std::string TypeOf(const Json& node) {
  return node.is_object() ? StringOr(node, "type") : std::string();
}

std::string SplitRegexOf(const Json& split) {
  auto pattern = split.find("pattern");
  if (pattern == split.end() || !pattern->is_object()) return "";
  return StringOr(*pattern, "Regex");
}

// A literal Split pattern ({"String": ...}) as a regex.
std::string EscapeRegex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}-").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// One member of the pre-tokenizer: ByteLevel, Split or Digits, as stages.
Status AppendStages(const Json& node, const std::string& path,
                    std::vector<PreTokenizerStage>* stages) {
  const std::string type = TypeOf(node);
  if (type == "ByteLevel") {
    if (BoolOr(node, "add_prefix_space", false)) {
      return Status::Error(path +
                           ": pre_tokenizer ByteLevel with add_prefix_space is not supported");
    }
    if (BoolOr(node, "use_regex", true)) {
      stages->push_back(PreTokenizerStage::Split(std::string(Gpt2SplitRegex())));
    }
    return Status::Ok();
  }
  if (type == "Digits") {
    PreTokenizerStage stage;
    stage.type = PreTokenizerStage::Type::kDigits;
    stage.individual_digits = BoolOr(node, "individual_digits", false);
    stages->push_back(stage);
    return Status::Ok();
  }
  if (type == "Split") {
    auto pattern = node.find("pattern");
    std::string regex;
    if (pattern != node.end() && pattern->is_object() && pattern->contains("Regex")) {
      regex = StringOr(*pattern, "Regex");
    } else if (pattern != node.end() && pattern->is_object() && pattern->contains("String")) {
      regex = EscapeRegex(StringOr(*pattern, "String"));
    } else {
      return Status::Error(path + ": pre_tokenizer Split without a Regex or String pattern");
    }
    PreTokenizerStage stage = PreTokenizerStage::Split(std::move(regex));
    const std::string behavior = StringOr(node, "behavior");
    if (behavior == "Removed") {
      stage.behavior = SplitBehavior::kRemoved;
    } else if (behavior != "Isolated") {
      return Status::Error(path + ": pre_tokenizer Split behavior '" + behavior +
                           "' is not supported; supported: Isolated, Removed");
    }
    stage.invert = BoolOr(node, "invert", false);
    stages->push_back(std::move(stage));
    return Status::Ok();
  }
  return Status::Error(path + ": unsupported pre_tokenizer member '" + type +
                       "'; supported: ByteLevel, Split, Digits, Sequence of them");
}

// The pre-tokenizer configurations of GPT-2, Llama-3, Qwen2, GLM-4.x and
// SmolLM2 / StarCoder run their scanners; any other Sequence of ByteLevel,
// Split and Digits runs as regex stages.
Status ReadPreTokenizer(const Json& pre, const std::string& path, TokenizerSpec* spec) {
  const std::string type = TypeOf(pre);
  const auto byte_level_ok = [](const Json& node, bool use_regex) {
    return TypeOf(node) == "ByteLevel" && !BoolOr(node, "add_prefix_space", false) &&
           BoolOr(node, "use_regex", true) == use_regex;
  };
  const auto scanner = [spec](PreTokenizerKind kind) {
    spec->pre = kind;
    return Status::Ok();
  };
  if (byte_level_ok(pre, true)) return scanner(PreTokenizerKind::kGpt2);
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
      pre["pretokenizers"].size() == 2) {
    const Json& first = pre["pretokenizers"][0];
    const Json& second = pre["pretokenizers"][1];
    if (TypeOf(first) == "Digits" && BoolOr(first, "individual_digits", false) &&
        byte_level_ok(second, true)) {
      return scanner(PreTokenizerKind::kSmolLm2);
    }
    if (TypeOf(first) == "Split" && byte_level_ok(second, false) &&
        StringOr(first, "behavior") == "Isolated" && !BoolOr(first, "invert", false)) {
      const std::string regex = SplitRegexOf(first);
      if (regex == Llama3SplitRegex()) return scanner(PreTokenizerKind::kLlama3);
      if (regex == Qwen2SplitRegex()) return scanner(PreTokenizerKind::kQwen2);
    }
  }
  std::vector<PreTokenizerStage> stages;
  if (type == "Sequence") {
    auto members = pre.find("pretokenizers");
    if (members == pre.end() || !members->is_array()) {
      return Status::Error(path + ": pre_tokenizer Sequence without a pretokenizers array");
    }
    for (const Json& member : *members) RETURN_IF_ERROR(AppendStages(member, path, &stages));
  } else if (!pre.is_null()) {
    RETURN_IF_ERROR(AppendStages(pre, path, &stages));
  }
  spec->pre = PreTokenizerKind::kRegex;
  spec->pre_stages = std::move(stages);
  return Status::Ok();
}

Status ReadNormalizer(const Json& root, const std::string& path, TokenizerSpec* spec) {
  auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) return Status::Ok();
  const std::string type = TypeOf(*it);
  if (type == "NFC") {
    spec->nfc = true;
    return Status::Ok();
  }
  if (type == "Sequence" && it->contains("normalizers") && (*it)["normalizers"].is_array() &&
      (*it)["normalizers"].empty()) {
    return Status::Ok();
  }
  return Status::Error(path + ": unsupported normalizer '" + type + "'; supported: none, NFC");
}

// A merge as tokenizer.json writes it: "a b" or ["a", "b"].
bool ParseMerge(const Json& m, BpeModel::Merge* out) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    const size_t space = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
    if (space == std::string::npos) return false;
    out->left = s.substr(0, space);
    out->right = s.substr(space + 1);
    return true;
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    out->left = m[0].get<std::string>();
    out->right = m[1].get<std::string>();
    return true;
  }
  return false;
}

// Streams model.vocab, model.merges and added_tokens into `spec` while the
// file is parsed; everything else becomes a (small) tree in `root`.
class TokenizerJsonReader {
 public:
  explicit TokenizerJsonReader(TokenizerSpec* spec) : spec_(spec), builder_(Limits()) {
    builder_.StreamChildren({"model", "vocab"}, [this](std::string_view key, size_t, Json&& v) {
      return Vocab(key, v);
    });
    builder_.StreamChildren({"model", "merges"},
                            [this](std::string_view, size_t i, Json&& v) { return Merge(i, v); });
    builder_.StreamChildren({"added_tokens"},
                            [this](std::string_view, size_t, Json&& v) { return Added(v); });
  }

  Status Read(const std::string& path) {
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, OpenJson(path));
    const Status st = ParseJsonWith(TextOf(*file), path, builder_);
    if (!st.ok()) return entry_error_ ? st : Status::Error("not valid JSON: " + st.message());
    return Status::Ok();
  }
  Json& root() { return builder_.root(); }
  int64_t max_id() const { return max_id_; }
  // model.vocab as read: (text, id) in file order.
  std::vector<std::pair<std::string, int32_t>>& vocab() { return vocab_; }

 private:
  static JsonLimits Limits() {
    JsonLimits limits;
    limits.max_depth = kMaxJsonDepth;
    limits.reject_duplicate_keys = false;  // as HF tokenizers, the last one wins
    return limits;
  }
  bool Fail(std::string message) {
    entry_error_ = true;
    return builder_.Fail(std::move(message));
  }
  bool CheckId(const Json& v, const char* what) {
    if (!v.is_number_integer()) return Fail(std::string(what) + " entry is not an integer id");
    const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                           ? INT64_MAX
                           : v.get<int64_t>();
    if (id < 0 || id >= kMaxId) {
      return Fail(std::string(what) + " id " + std::to_string(id) + " out of range");
    }
    max_id_ = std::max(max_id_, id);
    return true;
  }
  bool CheckCount(size_t n, int64_t limit, const char* what) {
    if (int64_t(n) < limit) return true;
    return Fail(std::string(what) + " has more than " + std::to_string(limit) + " entries");
  }
  bool CheckText(std::string_view text, const char* what) {
    if (text.size() <= kMaxTokenBytes) return true;
    return Fail(std::string(what) + " has a token of " + std::to_string(text.size()) +
                " bytes, over the limit of " + std::to_string(kMaxTokenBytes));
  }

  bool Vocab(std::string_view key, const Json& v) {
    if (!CheckCount(vocab_.size(), kMaxVocabTokens, "model.vocab") ||
        !CheckText(key, "model.vocab") || !CheckId(v, "model.vocab")) {
      return false;
    }
    vocab_.emplace_back(std::string(key), int32_t(v.get<int64_t>()));
    return true;
  }
  bool Merge(size_t i, const Json& m) {
    if (!CheckCount(spec_->merges.size(), kMaxMerges, "model.merges")) return false;
    BpeModel::Merge merge;
    if (!ParseMerge(m, &merge)) {
      return Fail("model.merges[" + std::to_string(i) + "] is not two tokens");
    }
    if (!CheckText(merge.left, "model.merges") || !CheckText(merge.right, "model.merges")) {
      return false;
    }
    spec_->merges.push_back(std::move(merge));
    return true;
  }
  bool Added(const Json& t) {
    if (!CheckCount(spec_->added.size(), kMaxVocabTokens, "added_tokens")) return false;
    if (!t.is_object() || !t.contains("id") || !t.contains("content") ||
        !t["content"].is_string()) {
      return Fail("added_tokens entry without integer id and string content");
    }
    if (!CheckId(t["id"], "added_tokens")) return false;
    AddedToken token;
    token.id = int32_t(t["id"].get<int64_t>());
    token.content = t["content"].get<std::string>();
    if (!CheckText(token.content, "added_tokens")) return false;
    token.special = BoolOr(t, "special", false);
    token.lstrip = BoolOr(t, "lstrip", false);
    token.rstrip = BoolOr(t, "rstrip", false);
    token.single_word = BoolOr(t, "single_word", false);
    spec_->added.push_back(std::move(token));
    return true;
  }

  TokenizerSpec* spec_;
  JsonDomBuilder builder_;
  std::vector<std::pair<std::string, int32_t>> vocab_;
  int64_t max_id_ = -1;
  bool entry_error_ = false;
};

Status CheckVocabAndMerges(const Json& model, const std::string& path);

// model: the tree with its vocab and merges already streamed into `spec`.
Status ReadModel(const Json& model, const std::string& path, TokenizerSpec* spec) {
  if (TypeOf(model) != "BPE") {
    return Status::Error(path + ": model.type '" + TypeOf(model) +
                         "' is not supported; "
                         "supported: BPE (byte-level)");
  }
  if (BoolOr(model, "byte_fallback", false) ||
      !StringOr(model, "continuing_subword_prefix").empty() ||
      !StringOr(model, "end_of_word_suffix").empty()) {
    return Status::Error(path +
                         ": model uses byte_fallback or subword affixes, which byte-level "
                         "BPE does not support");
  }
  spec->ignore_merges = BoolOr(model, "ignore_merges", false);
  return CheckVocabAndMerges(model, path);
}

// The shapes of model.vocab and model.merges (their entries were streamed).
Status CheckVocabAndMerges(const Json& model, const std::string& path) {
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return Status::Error(path + ": model.vocab is missing or not an object");
  }
  auto merges = model.find("merges");
  if (merges != model.end() && !merges->is_array() && !merges->is_null()) {
    return Status::Error(path + ": model.merges is not an array");
  }
  return Status::Ok();
}

// The first SpecialToken of TemplateProcessing's "single" template, if it leads.
std::string LeadingSpecialToken(const Json& post) {
  const std::string type = TypeOf(post);
  if (type == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
    for (const Json& p : post["processors"]) {
      std::string found = LeadingSpecialToken(p);
      if (!found.empty()) return found;
    }
    return "";
  }
  if (type != "TemplateProcessing" || !post.contains("single") || !post["single"].is_array() ||
      post["single"].empty()) {
    return "";
  }
  const Json& first = post["single"][0];
  if (!first.is_object() || !first.contains("SpecialToken")) return "";
  return StringOr(first["SpecialToken"], "id");
}

// Places model.vocab and added_tokens by id; `vocab` is consumed.
Status BuildIdTables(TokenizerSpec* spec, std::vector<std::pair<std::string, int32_t>>* vocab,
                     int64_t max_id, const std::string& path) {
  const int64_t entries = int64_t(vocab->size() + spec->added.size());
  if (max_id + 1 > 2 * entries + kIdSlack) {
    return Status::Error(path + ": token id " + std::to_string(max_id) + " is far past the " +
                         std::to_string(entries) +
                         " entries of model.vocab and added_tokens (ids must be dense)");
  }
  spec->token_texts.assign(static_cast<size_t>(max_id + 1), std::string());
  spec->kinds.assign(static_cast<size_t>(max_id + 1), TokenKind::kUnused);
  spec->bpe_ids.reserve(vocab->size());
  for (auto& [text, id] : *vocab) {
    spec->token_texts[id] = std::move(text);
    spec->kinds[id] = TokenKind::kNormal;
    spec->bpe_ids.push_back(id);
  }
  std::vector<std::pair<std::string, int32_t>>().swap(*vocab);
  for (const AddedToken& t : spec->added) {
    spec->token_texts[t.id] = t.content;
    spec->kinds[t.id] = t.special ? TokenKind::kSpecial : TokenKind::kAdded;
  }
  return Status::Ok();
}

int32_t IdOfText(const TokenizerSpec& spec, const std::string& text) {
  for (const AddedToken& t : spec.added) {
    if (t.content == text) return t.id;
  }
  for (const int32_t id : spec.bpe_ids) {
    if (spec.token_texts[id] == text) return id;
  }
  return -1;
}

// A special-token entry of tokenizer_config.json: a string or {"content": ...}.
std::string TokenContent(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return StringOr(*it, "content");
  return "";
}

}  // namespace

Status ReadHfTokenizerConfig(const std::string& path, TokenizerSpec* spec) {
  ASSIGN_OR_RETURN(Json config, ReadJson(path));
  if (!config.is_object()) return Status::Error(path + ": not a JSON object");
  const std::pair<const char*, int32_t*> ids[] = {
      {"bos_token", &spec->bos_id}, {"eos_token", &spec->eos_id}, {"pad_token", &spec->pad_id}};
  for (const auto& [key, id] : ids) {
    const std::string text = TokenContent(config, key);
    if (text.empty()) continue;
    *id = IdOfText(*spec, text);
    if (*id < 0)
      return Status::Error(path + ": " + key + " '" + text + "' is not in the vocabulary");
  }
  spec->add_bos = BoolOr(config, "add_bos_token", spec->add_bos);
  auto tmpl = config.find("chat_template");
  if (tmpl != config.end() && tmpl->is_string()) {
    spec->chat_template = tmpl->get<std::string>();
  } else if (tmpl != config.end() && tmpl->is_array()) {
    for (const Json& named : *tmpl) {
      if (named.is_object() && StringOr(named, "name") == "default") {
        spec->chat_template = StringOr(named, "template");
      }
    }
  }
  return Status::Ok();
}

namespace {

Status ReadTokenizerJson(const std::string& path, TokenizerSpec* spec) {
  TokenizerJsonReader reader(spec);
  RETURN_IF_ERROR(reader.Read(path));
  const Json& root = reader.root();
  if (!root.is_object() || !root.contains("model")) {
    return Status::Error(path + ": not a tokenizer.json (no model)");
  }
  if (root.contains("added_tokens") && !root["added_tokens"].is_null() &&
      !root["added_tokens"].is_array()) {
    return Status::Error(path + ": added_tokens is not an array");
  }
  if (IsSentencePieceJson(root)) {
    RETURN_IF_ERROR(CheckVocabAndMerges(root["model"], path));
    RETURN_IF_ERROR(ReadSentencePieceJson(root, path, spec));
  } else {
    RETURN_IF_ERROR(ReadModel(root["model"], path, spec));
    RETURN_IF_ERROR(ReadNormalizer(root, path, spec));
    const Json pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : Json();
    RETURN_IF_ERROR(ReadPreTokenizer(pre, path, spec));
    if (root.contains("decoder") && !root["decoder"].is_null() &&
        TypeOf(root["decoder"]) != "ByteLevel") {
      return Status::Error(path + ": decoder '" + TypeOf(root["decoder"]) +
                           "' is not supported; supported: ByteLevel");
    }
  }
  if (reader.max_id() < 0) return Status::Error(path + ": empty vocabulary");
  RETURN_IF_ERROR(BuildIdTables(spec, &reader.vocab(), reader.max_id(), path));
  if (root.contains("post_processor") && !root["post_processor"].is_null()) {
    const std::string bos = LeadingSpecialToken(root["post_processor"]);
    if (!bos.empty()) {
      spec->bos_id = IdOfText(*spec, bos);
      spec->add_bos = spec->bos_id >= 0;
    }
  }
  for (const auto& [text, slot] :
       {std::pair{"<|eot_id|>", &spec->eot_id}, std::pair{"<|eom_id|>", &spec->eom_id}}) {
    *slot = IdOfText(*spec, text);
  }
  return Status::Ok();
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(
    const std::string& tokenizer_json_path, const std::string& tokenizer_config_path_or_empty) {
  TokenizerSpec spec;
  spec.source = tokenizer_json_path;
  try {
    RETURN_IF_ERROR(ReadTokenizerJson(tokenizer_json_path, &spec));
    if (!tokenizer_config_path_or_empty.empty()) {
      RETURN_IF_ERROR(ReadHfTokenizerConfig(tokenizer_config_path_or_empty, &spec));
    }
  } catch (const std::exception& e) {  // nlohmann type errors on malformed input
    return Status::Error(tokenizer_json_path + ": malformed tokenizer files: " + e.what());
  }
  return Create(std::move(spec));
}

}  // namespace anymoe
