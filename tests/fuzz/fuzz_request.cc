// C1-C6: an OpenAI request body, as the server handles it: strict JSON parse
// with the server's nesting limit, ParseCompletionRequest (chat or not), the
// conversation rendered and encoded, then the response, stream chunks and an
// error built around text taken from the request (which may be invalid UTF-8,
// like model output) and serialised. Checked: every serialised body parses
// back as JSON, and accepted fields respect their documented ranges.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/parse_util.h"
#include "fuzz_input.h"
#include "server/anthropic_format.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/responses_request.h"
#include "server/openai_format.h"
#include "server/request_params.h"
#include "server/server_options.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;

const anymoe::Tokenizer& SmolTokenizer() {
  static const std::unique_ptr<anymoe::Tokenizer> tok = [] {
    const std::string dir = anymoe::fuzz::GoldenDir() + "/tokenizer/";
    auto t = anymoe::Tokenizer::FromHfJson(dir + "smollm2_small.tokenizer.json",
                                           dir + "smollm2_small.tokenizer_config.json");
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_request: %s\n", t.status().message().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return *tok;
}

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_request: %s\n", what);
    std::abort();
  }
}

// What the server sends must always be JSON a client can parse.
void CheckJson(const json& value) {
  Require(json::accept(anymoe::DumpJson(value)), "a serialised body is not valid JSON");
}

// A stream chunk, framed as SSE.
void CheckSse(const json& value) {
  const std::string sse = anymoe::SseData(value);
  Require(sse.rfind("data: ", 0) == 0 && sse.ends_with("\n\n"), "bad SSE framing");
  Require(json::accept(std::string_view(sse).substr(6, sse.size() - 8)),
          "an SSE chunk is not valid JSON");
}

void CheckRanges(const anymoe::CompletionRequest& r, int64_t vocab) {
  const anymoe::SamplingParams& s = r.sampling;
  Require(std::isfinite(s.temperature) && s.temperature >= 0 && s.temperature <= 2,
          "temperature out of range");
  Require(s.top_p > 0 && s.top_p <= 1, "top_p out of range");
  Require(s.min_p >= 0 && s.min_p <= 1, "min_p out of range");
  Require(!r.max_tokens || *r.max_tokens >= 1, "max_tokens below 1");
  Require(r.top_logprobs >= 0 && r.top_logprobs <= 20, "top_logprobs out of range");
  Require(r.stop.size() <= 16, "too many stop strings");
  for (int32_t id : r.prompt_ids) Require(id >= 0 && id < vocab, "prompt token id outside the vocabulary");
}

// The whole text goes through the one-shot response (one serialisation, the
// same escaping every body uses); stream chunks and the error carry its last
// few KiB, as a stream chunk carries one step's text, so that a 1 MiB prompt
// costs the harness two passes instead of a dozen.
void Respond(const anymoe::CompletionRequest& r, const std::string& text) {
  const anymoe::Tokenizer& tok = SmolTokenizer();
  anymoe::OpenAiFormatter f(tok, "cmpl-fuzz", 0, "fuzz-model", r.chat, r.logprobs,
                            r.include_usage);
  std::vector<anymoe::TokenLogprob> tokens;
  for (size_t i = 0; i < r.prompt_ids.size() && i < 8; ++i) {
    tokens.push_back({r.prompt_ids[i], -0.5f, {{r.prompt_ids[i], -0.5f}}, i});
  }
  const anymoe::Usage usage{int64_t(r.prompt_ids.size()), int64_t(tokens.size())};
  CheckJson(f.Response(text, tokens, "length", usage));
  constexpr size_t kChunkBytes = 4096;
  const std::string piece = text.substr(text.size() - std::min(text.size(), kChunkBytes));
  if (r.chat) CheckSse(f.RoleChunk());
  CheckSse(f.Chunk(piece, tokens, std::nullopt));
  CheckSse(f.Chunk(piece, tokens, "stop"));
  CheckSse(f.UsageChunk(usage));
  CheckJson(anymoe::ApiErrorValue(anymoe::InvalidField("prompt", piece, "fuzz")));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Up to the server's 1 MiB body limit (ServerOptions::max_body_bytes).
  static std::string storage;
  const std::string_view expanded = anymoe::fuzz::ExpandInput(data, size, (1 << 20) + 1, &storage);
  data = reinterpret_cast<const uint8_t*>(expanded.data());
  size = expanded.size();
  if (size < 1 || size > (1 << 20) + 1) return 0;
  const anymoe::fuzz::CpuBudget budget("fuzz_request");
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const anymoe::ServerOptions server;  // the server's limits
  anymoe::JsonLimits limits;
  limits.max_depth = server.json_max_depth;
  limits.max_values = server.json_max_values;
  limits.max_containers = server.json_max_containers;
  limits.quote_keys_in_errors = false;
  auto parsed = anymoe::ParseJsonStrict(body, "request body", limits);
  if (!parsed.ok()) return 0;
  const int64_t vocab = SmolTokenizer().vocab_size();
  anymoe::RequestLimits request_limits;
  request_limits.vocab_size = vocab;
  // The same body as an Anthropic Messages and a Responses request: each is
  // translated into a chat body or refused with an error that serialises,
  // and a translated body goes through the chat request reader.
  {
    const nlohmann::ordered_json ordered =
        nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
    for (int api = 0; api < 2; ++api) {
      nlohmann::ordered_json translated;
      const auto error = api == 0 ? anymoe::TranslateMessagesRequest(
                                        ordered, anymoe::MessagesLimits{}, false, &translated)
                                  : anymoe::TranslateResponsesRequest(ordered, false, &translated);
      if (error) {
        CheckJson(anymoe::AnthropicErrorValue(*error));
        continue;
      }
      anymoe::CompletionRequest r;
      const json plain = json::parse(translated.dump());
      if (auto e = anymoe::ParseCompletionRequest(plain, true, request_limits, &r, &translated)) {
        CheckJson(anymoe::ApiErrorValue(*e));
      }
    }
  }
  anymoe::CompletionRequest request;
  if (auto error = anymoe::ParseCompletionRequest(*parsed, chat, request_limits, &request)) {
    CheckJson(anymoe::ApiErrorValue(*error));
    return 0;
  }
  CheckRanges(request, vocab);
  std::string text = request.prompt_text;
  // The whole body is parsed and serialised; the prompt is encoded up to 64
  // KiB (libFuzzer's own input size), since under the sanitizers encoding a
  // 256 KiB word alone takes half the 1 s budget. Longer prompts are
  // fuzz_tokenizer's (to 256 KiB) and held linear to 1 MiB by
  // TokenizerRobustnessTest.HugeSingleClassRunsAreLinearAndExact.
  constexpr size_t kEncodeBytes = 64 << 10;
  if (chat) {
    text = anymoe::RenderChat(anymoe::ChatTemplateKind::kChatML, request.messages, true);
    (void)SmolTokenizer().Encode(std::string_view(text).substr(0, kEncodeBytes), false, true);
  } else if (!request.prompt_is_ids) {
    (void)SmolTokenizer().Encode(std::string_view(text).substr(0, kEncodeBytes), false, false);
  }
  // Model output can stop inside a character: cut the text at a fuzzed byte.
  Respond(request, text.substr(0, text.size() - (data[0] >> 1) % (text.size() + 1)));
  return 0;
}
