// ReadSentencePieceJson: the tokenizer.json pipelines of SentencePiece models
// converted by transformers. Two real layouts: the legacy one (normalizer
// Sequence[Prepend("▁"), Replace(" ", "▁")], no pre-tokenizer; Llama-2,
// Mistral-7B v0.1 before 2024) and the current one (no normalizer, Metaspace
// pre-tokenizer with prepend_scheme "first"). Both decode with
// Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)] or a
// Metaspace decoder.
#include <nlohmann/json.hpp>

#include "tokenizer/sentencepiece_loaders.h"

namespace anymoe {
namespace {

using Json = nlohmann::json;
using Prefix = SentencePieceOptions::Prefix;

constexpr const char* kMarker = "\xE2\x96\x81";

std::string TypeOf(const Json& node) {
  if (!node.is_object()) return "";
  auto it = node.find("type");
  return (it != node.end() && it->is_string()) ? it->get<std::string>() : "";
}

// The items of a Sequence node under `list_key`, or the node itself.
std::vector<Json> Steps(const Json& node, const char* list_key) {
  if (TypeOf(node) != "Sequence") return {node};
  auto it = node.find(list_key);
  if (it == node.end() || !it->is_array()) return {};
  return std::vector<Json>(it->begin(), it->end());
}

bool IsStringPattern(const Json& step, std::string_view from, std::string_view to) {
  auto pattern = step.find("pattern");
  return pattern != step.end() && pattern->is_object() && pattern->contains("String") &&
         (*pattern)["String"] == from && step.value("content", std::string()) == to;
}

Status Unsupported(const std::string& path, const char* field, const Json& node,
                   const char* supported) {
  return Status::Error(path + ": unsupported " + field + " " +
                       node.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 200) +
                       " for a SentencePiece BPE; supported: " + supported);
}

Status ReadNormalizer(const Json& root, const std::string& path, SentencePieceOptions* options,
                      bool* prepends) {
  auto it = root.find("normalizer");
  if (it == root.end() || it->is_null()) return Status::Ok();
  constexpr const char* kSupported = "none, Prepend(\"▁\"), Replace(\" \", \"▁\") or a Sequence";
  for (const Json& step : Steps(*it, "normalizers")) {
    const std::string type = TypeOf(step);
    if (type == "Prepend" && step.value("prepend", std::string()) == kMarker) {
      *prepends = true;
    } else if (type == "Replace" && IsStringPattern(step, " ", kMarker)) {
      options->escape_spaces = true;
    } else {
      return Unsupported(path, "normalizer", step, kSupported);
    }
  }
  return Status::Ok();
}

Status ReadPreTokenizer(const Json& root, const std::string& path, SentencePieceOptions* options) {
  auto it = root.find("pre_tokenizer");
  if (it == root.end() || it->is_null()) return Status::Ok();
  const Json& pre = *it;
  if (TypeOf(pre) != "Metaspace" || pre.value("replacement", std::string()) != kMarker) {
    return Unsupported(path, "pre_tokenizer", pre, "none or Metaspace(\"▁\")");
  }
  options->escape_spaces = true;
  options->split_on_marker = pre.value("split", true);
  // Files written before prepend_scheme existed have add_prefix_space.
  const std::string scheme = pre.contains("prepend_scheme")
                                 ? pre.value("prepend_scheme", std::string())
                                 : (pre.value("add_prefix_space", true) ? "always" : "never");
  if (scheme == "first") {
    options->prefix = Prefix::kFirstSegment;
  } else if (scheme == "always") {
    options->prefix = Prefix::kUnlessMarked;
  } else if (scheme != "never") {
    return Unsupported(path, "pre_tokenizer", pre, "prepend_scheme first, always or never");
  }
  return Status::Ok();
}

Status ReadDecoder(const Json& root, const std::string& path, SentencePieceOptions* options) {
  auto it = root.find("decoder");
  constexpr const char* kSupported =
      "Sequence[Replace(\"▁\", \" \"), ByteFallback, Fuse, Strip(\" \", 0 or 1, 0)] or Metaspace";
  if (it == root.end() || it->is_null()) return Unsupported(path, "decoder", Json(), kSupported);
  bool restores_spaces = false;
  options->strip_decoded_space = false;
  for (const Json& step : Steps(*it, "decoders")) {
    const std::string type = TypeOf(step);
    if (type == "Replace" && IsStringPattern(step, kMarker, " ")) {
      restores_spaces = true;
    } else if (type == "ByteFallback" || type == "Fuse") {
      continue;
    } else if (type == "Strip" && step.value("content", std::string()) == " " &&
               step.value("start", 0) <= 1 && step.value("stop", 0) == 0) {
      options->strip_decoded_space = step.value("start", 0) == 1;
    } else if (type == "Metaspace" && step.value("replacement", std::string()) == kMarker) {
      restores_spaces = true;
      const std::string scheme = step.contains("prepend_scheme")
                                     ? step.value("prepend_scheme", std::string())
                                     : (step.value("add_prefix_space", true) ? "always" : "never");
      options->strip_decoded_space = scheme != "never";
    } else {
      return Unsupported(path, "decoder", step, kSupported);
    }
  }
  if (!restores_spaces) return Unsupported(path, "decoder", *it, kSupported);
  return Status::Ok();
}

}  // namespace

bool IsSentencePieceJson(const Json& root) {
  if (!root.is_object() || !root.contains("model") || TypeOf(root["model"]) != "BPE") return false;
  const Json& model = root["model"];
  if (model.contains("byte_fallback") && model["byte_fallback"] == true) return true;
  if (root.contains("pre_tokenizer") && TypeOf(root["pre_tokenizer"]) == "Metaspace") return true;
  if (!root.contains("normalizer")) return false;
  for (const Json& step : Steps(root["normalizer"], "normalizers")) {
    if (TypeOf(step) == "Prepend") return true;
  }
  return false;
}

Status ReadSentencePieceJson(const Json& root, const std::string& path, TokenizerSpec* spec) {
  const Json& model = root["model"];
  SentencePieceOptions options;
  options.prefix = Prefix::kNever;
  options.escape_spaces = false;
  bool prepends = false;
  RETURN_IF_ERROR(ReadNormalizer(root, path, &options, &prepends));
  RETURN_IF_ERROR(ReadPreTokenizer(root, path, &options));
  // Prepend runs first (normalizers precede pre-tokenizers), after which every
  // segment starts with "▁" and Metaspace adds nothing.
  if (prepends) options.prefix = Prefix::kEverySegment;
  RETURN_IF_ERROR(ReadDecoder(root, path, &options));
  auto unset = [&](const char* key) {
    auto it = model.find(key);
    return it == model.end() || it->is_null() || (it->is_string() && it->empty());
  };
  if (model.value("ignore_merges", false) || !unset("continuing_subword_prefix") ||
      !unset("end_of_word_suffix")) {
    return Status::Error(path +
                         ": model uses ignore_merges or subword affixes, which the "
                         "SentencePiece BPE does not support");
  }
  options.byte_fallback = model.value("byte_fallback", false);
  options.fuse_unk = model.value("fuse_unk", false);
  const Json unk = model.value("unk_token", Json());
  if (unk.is_string()) options.unk_token = unk.get<std::string>();
  spec->sentencepiece = std::move(options);
  return Status::Ok();
}

}  // namespace anymoe
