// Tokenizer::FromHfJson: reads an HF tokenizer.json (and optionally its
// tokenizer_config.json) into a TokenizerSpec. Only the byte-level BPE pipelines
// whose pre-tokenizers we have scanners for are accepted; anything else is an
// error that names the field and lists what is supported.
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/parse_util.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxJsonBytes = size_t{512} << 20;
constexpr int kMaxJsonDepth = 64;  // real tokenizer.json files nest about 6 deep

Expected<Json> ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot open");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<size_t>(size) > kMaxJsonBytes) {
    return Status::Error(path + ": size " + std::to_string(size) + " exceeds the limit of " +
                         std::to_string(kMaxJsonBytes) + " bytes");
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  // Depth is capped while parsing: copying or dumping a deeply nested value
  // recurses once per level and would overflow the stack (nlohmann/json #5387).
  JsonLimits limits;
  limits.max_depth = kMaxJsonDepth;
  limits.reject_duplicate_keys = false;  // as HF tokenizers, the last one wins
  auto json = ParseJsonStrict(text, path, limits);
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

// Recognises the pre-tokenizer configurations of GPT-2, Llama-3, Qwen2, GLM-4.x and
// SmolLM2 / StarCoder.
Expected<PreTokenizerKind> PreTokenizerOf(const Json& pre, const std::string& path) {
  const std::string type = TypeOf(pre);
  const auto byte_level_ok = [](const Json& node, bool use_regex) {
    return TypeOf(node) == "ByteLevel" && !BoolOr(node, "add_prefix_space", false) &&
           BoolOr(node, "use_regex", true) == use_regex;
  };
  if (byte_level_ok(pre, true)) return PreTokenizerKind::kGpt2;
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
      pre["pretokenizers"].size() == 2) {
    const Json& first = pre["pretokenizers"][0];
    const Json& second = pre["pretokenizers"][1];
    if (TypeOf(first) == "Digits" && BoolOr(first, "individual_digits", false) &&
        byte_level_ok(second, true)) {
      return PreTokenizerKind::kSmolLm2;
    }
    if (TypeOf(first) == "Split" && byte_level_ok(second, false) &&
        StringOr(first, "behavior") == "Isolated" && !BoolOr(first, "invert", false)) {
      const std::string regex = SplitRegexOf(first);
      if (regex == Llama3SplitRegex()) return PreTokenizerKind::kLlama3;
      if (regex == Qwen2SplitRegex()) return PreTokenizerKind::kQwen2;
    }
  }
  return Status::Error(path + ": unsupported pre_tokenizer " +
                       pre.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 300) +
                       "; supported: ByteLevel(use_regex) [gpt2], Sequence[Digits(individual), "
                       "ByteLevel] [smollm2], Sequence[Split(<Llama-3 or Qwen2 regex>), "
                       "ByteLevel(use_regex=false)] [llama3, glm4, qwen2]");
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

Status ReadModel(const Json& model, const std::string& path, TokenizerSpec* spec, int64_t* max_id) {
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
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return Status::Error(path + ": model.vocab is missing or not an object");
  }
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer()) {
      return Status::Error(path + ": model.vocab entry is not an integer id");
    }
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 24)) {
      return Status::Error(path + ": model.vocab id " + std::to_string(id) + " out of range");
    }
    spec->model_vocab.emplace_back(it.key(), static_cast<int32_t>(id));
    *max_id = std::max(*max_id, id);
  }
  auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) return Status::Ok();
  for (const Json& m : *merges) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.size() > 1 ? s.find(' ', 1) : std::string::npos;
      if (space == std::string::npos) return Status::Error(path + ": malformed merge '" + s + "'");
      spec->merges.push_back({s.substr(0, space), s.substr(space + 1)});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec->merges.push_back({m[0].get<std::string>(), m[1].get<std::string>()});
    } else {
      return Status::Error(path + ": malformed entry in model.merges");
    }
  }
  return Status::Ok();
}

Status ReadAddedTokens(const Json& root, const std::string& path, TokenizerSpec* spec,
                       int64_t* max_id) {
  auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return Status::Ok();
  if (!added->is_array()) return Status::Error(path + ": added_tokens is not an array");
  for (const Json& t : *added) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return Status::Error(path + ": added_tokens entry without integer id and string content");
    }
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 24)) {
      return Status::Error(path + ": added token id " + std::to_string(id) + " out of range");
    }
    AddedToken token;
    token.id = static_cast<int32_t>(id);
    token.content = t["content"].get<std::string>();
    token.special = BoolOr(t, "special", false);
    token.lstrip = BoolOr(t, "lstrip", false);
    token.rstrip = BoolOr(t, "rstrip", false);
    token.single_word = BoolOr(t, "single_word", false);
    spec->added.push_back(std::move(token));
    *max_id = std::max(*max_id, id);
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

void BuildIdTables(TokenizerSpec* spec, int64_t max_id) {
  spec->token_texts.assign(static_cast<size_t>(max_id + 1), std::string());
  spec->kinds.assign(static_cast<size_t>(max_id + 1), TokenKind::kUnused);
  for (const auto& [text, id] : spec->model_vocab) {
    spec->token_texts[id] = text;
    spec->kinds[id] = TokenKind::kNormal;
  }
  for (const AddedToken& t : spec->added) {
    spec->token_texts[t.id] = t.content;
    spec->kinds[t.id] = t.special ? TokenKind::kSpecial : TokenKind::kAdded;
  }
}

int32_t IdOfText(const TokenizerSpec& spec, const std::string& text) {
  for (const AddedToken& t : spec.added) {
    if (t.content == text) return t.id;
  }
  for (const auto& [vocab_text, id] : spec.model_vocab) {
    if (vocab_text == text) return id;
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

Status ReadConfig(const std::string& path, TokenizerSpec* spec) {
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

Status ReadTokenizerJson(const Json& root, const std::string& path, TokenizerSpec* spec) {
  if (!root.is_object() || !root.contains("model")) {
    return Status::Error(path + ": not a tokenizer.json (no model)");
  }
  int64_t max_id = -1;
  RETURN_IF_ERROR(ReadModel(root["model"], path, spec, &max_id));
  RETURN_IF_ERROR(ReadAddedTokens(root, path, spec, &max_id));
  RETURN_IF_ERROR(ReadNormalizer(root, path, spec));
  const Json pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : Json();
  ASSIGN_OR_RETURN(spec->pre, PreTokenizerOf(pre, path));
  if (root.contains("decoder") && !root["decoder"].is_null() &&
      TypeOf(root["decoder"]) != "ByteLevel") {
    return Status::Error(path + ": decoder '" + TypeOf(root["decoder"]) +
                         "' is not supported; supported: ByteLevel");
  }
  if (max_id < 0) return Status::Error(path + ": empty vocabulary");
  BuildIdTables(spec, max_id);
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
    ASSIGN_OR_RETURN(Json root, ReadJson(tokenizer_json_path));
    RETURN_IF_ERROR(ReadTokenizerJson(root, tokenizer_json_path, &spec));
    if (!tokenizer_config_path_or_empty.empty()) {
      RETURN_IF_ERROR(ReadConfig(tokenizer_config_path_or_empty, &spec));
    }
  } catch (const std::exception& e) {  // nlohmann type errors on malformed input
    return Status::Error(tokenizer_json_path + ": malformed tokenizer files: " + e.what());
  }
  return Create(std::move(spec));
}

}  // namespace anymoe
