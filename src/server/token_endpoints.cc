#include "server/token_endpoints.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formats/parse_util.h"
#include "server/completion_endpoint.h"
#include "server/request_params.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_class.h"

namespace anymoe {
namespace {

using nlohmann::json;

// The body as a JSON object, or the 400 already sent.
std::optional<json> ReadBody(const ServerOptions& options, const HttpRequest& req,
                             ResponseStream& out) {
  auto body = ParseJsonStrict(req.body, "request body", RequestJsonLimits(options));
  if (!body.ok()) {
    SendError(out, InvalidField("", body.status().message(), "invalid_json"));
    return std::nullopt;
  }
  if (!body->is_object()) {
    SendError(out, InvalidField("", "the request body must be a JSON object", "invalid_type"));
    return std::nullopt;
  }
  return std::move(*body);
}

void SendJson(const json& value, ResponseStream& out) {
  HttpResponse r;
  r.content_type = "application/json";
  r.body = DumpJson(value);
  out.Send(std::move(r));
}

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    uint32_t cp = 0;
    size_t len = 0;
    if (DecodeUtf8At(bytes, i, &cp, &len) != Utf8Step::kValid) return false;
    i += len;
  }
  return true;
}

}  // namespace

void HandleTokenize(const ServerOptions& options, const Tokenizer& tokenizer,
                    const HttpRequest& req, ResponseStream& out) {
  const auto body = ReadBody(options, req, out);
  if (!body) return;
  const auto content = body->find("content");
  if (content == body->end() || !content->is_string()) {
    return SendError(out, InvalidField("content", "expected the text to tokenize, a string",
                                       content == body->end() ? "missing_field" : "invalid_type"));
  }
  bool add_special = false, parse_special = true, with_pieces = false;
  for (const auto& [name, flag] : {std::pair{"add_special", &add_special},
                                   std::pair{"parse_special", &parse_special},
                                   std::pair{"with_pieces", &with_pieces}}) {
    if (auto e = ReadBool(*body, name, flag)) return SendError(out, *e);
  }
  const std::vector<int32_t> ids =
      tokenizer.Encode(content->get_ref<const std::string&>(), add_special, parse_special);
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    // The piece as text when it is whole UTF-8, else its bytes (llama-server's shape).
    const std::string_view raw = tokenizer.TokenPiece(id);
    json p;
    if (IsValidUtf8(raw)) {
      p = std::string(raw);
    } else {
      p = json::array();
      for (unsigned char c : raw) p.push_back(int(c));
    }
    tokens.push_back({{"id", id}, {"piece", std::move(p)}});
  }
  SendJson({{"tokens", std::move(tokens)}}, out);
}

void HandleDetokenize(const ServerOptions& options, const Tokenizer& tokenizer, int64_t vocab_size,
                      const HttpRequest& req, ResponseStream& out) {
  const auto body = ReadBody(options, req, out);
  if (!body) return;
  const auto tokens = body->find("tokens");
  if (tokens == body->end() || !tokens->is_array()) {
    return SendError(out, InvalidField("tokens", "expected an array of token ids",
                                       tokens == body->end() ? "missing_field" : "invalid_type"));
  }
  std::vector<int32_t> ids;
  if (auto e = ReadTokenIds(*tokens, "tokens", vocab_size, &ids)) return SendError(out, *e);
  SendJson({{"content", tokenizer.Decode(ids)}}, out);
}

}  // namespace anymoe
