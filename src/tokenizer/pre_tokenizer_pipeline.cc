// PreTokenizerPipeline: runs the stages in order over the pieces, and the table
// of GGUF tokenizer.ggml.pre names. The regexes are the model authors' own, as
// their tokenizer.json files (or, for Kimi, tokenization_kimi.py) write them;
// llama.cpp's src/llama-vocab.cpp lists the same ones for the same names.
#include "tokenizer/pre_tokenizer_pipeline.h"

#include <span>

#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

using Stage = PreTokenizerStage;

// DeepSeek-V3 / R1 / V3.1 / V3.2 tokenizer.json: three Splits, then ByteLevel.
constexpr std::string_view kDeepSeekV3[] = {
    R"re(\p{N}{1,3})re",
    R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
};
// DeepSeek-LLM / V2 / V2-Lite.
constexpr std::string_view kDeepSeekLlm[] = {
    R"re([\r\n])re",
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re",
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
    R"re(\s+$)re",
    R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
    R"re(\p{N}+)re",
};
constexpr std::string_view kDeepSeekCoder[] = {
    R"re([\r\n])re",    R"re(\s?\p{L}+)re",
    R"re(\s?\p{P}+)re", R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
    R"re(\p{N})re",
};
constexpr std::string_view kFalcon[] = {
    R"re([\p{P}\$\+<=>\^~\|`]+)re",
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re",
    R"re([0-9][0-9][0-9])re",
};
// gpt-oss (o200k_base), Llama-4.
constexpr std::string_view kGpt4o[] = {
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
};
// Mistral Tekken (Mistral-Nemo, Pixtral).
constexpr std::string_view kTekken[] = {
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
};
constexpr std::string_view kQwen35[] = {
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
};
// Kimi K2 / K2.5 (tokenization_kimi.py pat_str; its engine is tiktoken's):
// KimiK2SplitRegex(), which the kKimiK2 scanner implements.
constexpr std::string_view kKimiK2[] = {KimiK2SplitRegex()};

struct NamedStages {
  std::string_view name;
  std::span<const std::string_view> patterns;  // regex Splits; empty: the scanner
  PreTokenizerKind scanner;
};

// llama.cpp's `tokenizer.ggml.pre` names. "default" is taken as GPT-2
// (llama.cpp's legacy default differs slightly).
const NamedStages kGgufNames[] = {
    {"default", {}, PreTokenizerKind::kGpt2},
    {"gpt-2", {}, PreTokenizerKind::kGpt2},
    {"gpt2", {}, PreTokenizerKind::kGpt2},
    {"mpt", {}, PreTokenizerKind::kGpt2},
    {"olmo", {}, PreTokenizerKind::kGpt2},
    {"llama-bpe", {}, PreTokenizerKind::kLlama3},
    {"llama3", {}, PreTokenizerKind::kLlama3},
    {"llama-v3", {}, PreTokenizerKind::kLlama3},
    {"dbrx", {}, PreTokenizerKind::kLlama3},
    {"smaug-bpe", {}, PreTokenizerKind::kLlama3},
    {"glm4", {}, PreTokenizerKind::kLlama3},
    {"chatglm-bpe", {}, PreTokenizerKind::kLlama3},
    {"qwen2", {}, PreTokenizerKind::kQwen2},
    {"stablelm2", {}, PreTokenizerKind::kQwen2},
    {"deepseek-r1-qwen", {}, PreTokenizerKind::kQwen2},
    {"smollm", {}, PreTokenizerKind::kSmolLm2},
    {"starcoder", {}, PreTokenizerKind::kSmolLm2},
    {"refact", {}, PreTokenizerKind::kSmolLm2},
    {"codeshell", {}, PreTokenizerKind::kSmolLm2},
    {"deepseek-v3", kDeepSeekV3, PreTokenizerKind::kGpt2},
    // llama.cpp splits these as deepseek-v3 (one case in llama-vocab.cpp); its
    // converter, run with transformers 5.x on DeepSeek-V3's own tokenizer.json,
    // writes "joyai-llm" (JoyAI-LLM ships that tokenizer; the check hash matches).
    {"joyai-llm", kDeepSeekV3, PreTokenizerKind::kGpt2},
    {"hunyuan-dense", kDeepSeekV3, PreTokenizerKind::kGpt2},
    {"deepseek-llm", kDeepSeekLlm, PreTokenizerKind::kGpt2},
    {"deepseek-coder", kDeepSeekCoder, PreTokenizerKind::kGpt2},
    {"falcon", kFalcon, PreTokenizerKind::kGpt2},
    {"gpt-4o", kGpt4o, PreTokenizerKind::kGpt2},
    {"llama4", kGpt4o, PreTokenizerKind::kGpt2},
    {"tekken", kTekken, PreTokenizerKind::kGpt2},
    {"qwen35", kQwen35, PreTokenizerKind::kGpt2},
    {"kimi-k2", kKimiK2, PreTokenizerKind::kGpt2},
};

void AppendDigitsSplit(std::string_view text, bool individual, std::vector<std::string_view>* out) {
  const std::vector<TextChar> chars = DecodeText(text);
  size_t i = 0;
  while (i < chars.size()) {
    const bool numeric = IsDigitsNumeric(chars[i].cp);
    size_t end = i + 1;
    if (!numeric || !individual) {
      while (end < chars.size() && IsDigitsNumeric(chars[end].cp) == numeric) ++end;
    }
    const size_t from = chars[i].offset;
    const size_t to = chars[end - 1].offset + chars[end - 1].len;
    out->push_back(text.substr(from, to - from));
    i = end;
  }
}

}  // namespace

std::string_view Gpt2SplitRegex() {
  return R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
}

Expected<std::vector<PreTokenizerStage>> PreTokenizerStagesForGgufName(std::string_view name) {
  for (const NamedStages& entry : kGgufNames) {
    if (entry.name != name) continue;
    std::vector<PreTokenizerStage> stages;
    if (entry.patterns.empty()) stages.push_back(Stage::Scanner(entry.scanner));
    for (std::string_view p : entry.patterns) stages.push_back(Stage::Split(std::string(p)));
    return stages;
  }
  std::string known;
  for (const NamedStages& entry : kGgufNames) {
    if (!known.empty()) known += ", ";
    known += entry.name;
  }
  return Status::Error("unsupported pre-tokenizer '" + std::string(name) + "'; known: " + known);
}

Expected<PreTokenizerPipeline> PreTokenizerPipeline::Build(
    const std::vector<PreTokenizerStage>& stages, bool use_scanners) {
  PreTokenizerPipeline p;
  for (PreTokenizerStage stage : stages) {
    if (stage.type == Stage::Type::kSplit && use_scanners &&
        stage.behavior == SplitBehavior::kIsolated && !stage.invert) {
      if (stage.pattern == Gpt2SplitRegex()) stage = Stage::Scanner(PreTokenizerKind::kGpt2);
      if (stage.pattern == Llama3SplitRegex()) stage = Stage::Scanner(PreTokenizerKind::kLlama3);
      if (stage.pattern == Qwen2SplitRegex()) stage = Stage::Scanner(PreTokenizerKind::kQwen2);
      if (stage.pattern == KimiK2SplitRegex()) stage = Stage::Scanner(PreTokenizerKind::kKimiK2);
    }
    p.regex_index_.push_back(-1);
    if (stage.type == Stage::Type::kSplit) {
      ASSIGN_OR_RETURN(RegexSplitter splitter,
                       RegexSplitter::Compile(stage.pattern, stage.behavior, stage.invert));
      p.regex_index_.back() = static_cast<int>(p.regexes_.size());
      p.regexes_.push_back(std::move(splitter));
    }
    p.stages_.push_back(std::move(stage));
  }
  return p;
}

Status PreTokenizerPipeline::RunStage(size_t stage, std::string_view text,
                                      std::vector<std::string_view>* out) const {
  const PreTokenizerStage& s = stages_[stage];
  switch (s.type) {
    case Stage::Type::kScanner:
      PreTokenize(s.scanner, text, out);
      return Status::Ok();
    case Stage::Type::kDigits:
      AppendDigitsSplit(text, s.individual_digits, out);
      return Status::Ok();
    case Stage::Type::kSplit:
      return regexes_[size_t(regex_index_[stage])].Split(text, out);
  }
  return Status::Ok();
}

Status PreTokenizerPipeline::Split(std::string_view text,
                                   std::vector<std::string_view>* pieces) const {
  if (stages_.empty()) {
    if (!text.empty()) pieces->push_back(text);
    return Status::Ok();
  }
  if (stages_.size() == 1) return RunStage(0, text, pieces);
  std::vector<std::string_view> current = {text}, next;
  for (size_t stage = 0; stage < stages_.size(); ++stage) {
    next.clear();
    for (std::string_view piece : current) RETURN_IF_ERROR(RunStage(stage, piece, &next));
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
  return Status::Ok();
}

}  // namespace anymoe
