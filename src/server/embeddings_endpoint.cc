#include "server/embeddings_endpoint.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/parse_util.h"
#include "runtime/engine.h"
#include "server/api_error.h"
#include "server/completion_endpoint.h"
#include "server/completion_service.h"
#include "server/event_channel.h"
#include "server/request_params.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace anymoe {
namespace {

using nlohmann::json;

// OpenAI's own limit on the inputs of one request.
constexpr size_t kMaxInputs = 2048;
constexpr auto kPollInterval = std::chrono::milliseconds(50);

// The inputs of `field` as token sequences: a string, an array of strings, an
// array of token ids (one input) or an array of such arrays.
std::optional<ApiError> ReadInputs(const json& value, const char* field, const Tokenizer& tokenizer,
                                   int64_t vocab, std::vector<std::vector<int32_t>>* inputs) {
  std::optional<ApiError> failed;
  const auto text = [&](const json& s) {
    // As the model's tokenizer encodes a document (HF's tokenizer(text)): BOS
    // where the model adds one, special tokens written in the text parsed.
    auto ids = tokenizer.TryEncode(s.get_ref<const std::string&>(), tokenizer.add_bos_default(),
                                   /*parse_special=*/true);
    if (!ids.ok()) {
      failed = ApiErrorFromStatus(ids.status());
      failed->param = field;
    } else if (s.get_ref<const std::string&>().empty()) {
      inputs->emplace_back();  // refused below, whatever a BOS would add
    } else {
      inputs->push_back(std::move(*ids));
    }
    return !failed;
  };
  const auto empty = [&] {
    return InvalidField(field, std::string(field) + " must not be empty", "empty_input");
  };
  if (value.is_string()) {
    if (!text(value)) return failed;
  } else if (value.is_array() && !value.empty() && value.front().is_number()) {
    inputs->emplace_back();
    if (auto e = ReadTokenIds(value, field, vocab, &inputs->back())) return e;
  } else if (value.is_array()) {
    if (value.empty()) return empty();
    if (value.size() > kMaxInputs) {
      return InvalidField(field, std::string(field) + " holds " + std::to_string(value.size()) +
                                     " inputs (at most " + std::to_string(kMaxInputs) + ")",
                          "too_many_inputs");
    }
    for (const json& item : value) {
      if (item.is_string()) {
        if (!text(item)) return failed;
      } else if (item.is_array()) {
        inputs->emplace_back();
        if (auto e = ReadTokenIds(item, field, vocab, &inputs->back())) return e;
      } else {
        return InvalidField(field, "each input must be a string or an array of token ids",
                            "invalid_type");
      }
    }
  } else {
    return InvalidField(field, "expected a string, an array of strings or of token ids",
                        value.is_null() ? "missing_field" : "invalid_type");
  }
  for (const auto& ids : *inputs) {
    if (ids.empty()) return empty();
  }
  return std::nullopt;
}

struct Pending {
  std::shared_ptr<EventChannel> channel;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  void CancelAll() {
    for (auto& h : handles) h->Cancel();
  }
};

}  // namespace

void NormalizeEmbedding(std::span<float> v, int64_t norm) {
  if (norm < 0) return;
  double scale = 0;
  if (norm == 0) {
    for (float x : v) scale = std::max(scale, std::fabs(double(x)));
    scale /= 32760.0;
  } else {
    for (float x : v) scale += norm == 2 ? double(x) * x : std::pow(std::fabs(double(x)), double(norm));
    scale = norm == 1 ? scale : std::pow(scale, 1.0 / double(norm));
  }
  const double inv = scale > 0 ? 1.0 / scale : 0.0;
  for (float& x : v) x = float(double(x) * inv);
}

std::string EmbeddingBase64(std::span<const float> v) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * sizeof(float), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof(bits));
    for (int b = 0; b < 4; ++b) bytes[i * 4 + size_t(b)] = char((bits >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < n; ++k) chunk |= uint32_t(uint8_t(bytes[i + k])) << (16 - 8 * k);
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=');
    }
  }
  return out;
}

void HandleEmbeddings(const ServerOptions& options, const ServingModel& model, bool openai,
                      const HttpRequest& req, ResponseStream& out) {
  auto parsed = ParseJsonStrict(req.body, "request body", RequestJsonLimits(options));
  if (!parsed.ok()) return SendError(out, InvalidField("", parsed.status().message(), "invalid_json"));
  const json& body = *parsed;
  if (!body.is_object()) {
    return SendError(out, InvalidField("", "the request body must be a JSON object", "invalid_type"));
  }
  Engine& engine = *model.engine;
  const int64_t hidden = engine.model().config().hidden_size;
  const int64_t vocab =
      std::min<int64_t>(engine.tokenizer().vocab_size(), engine.model().config().vocab_size);

  // llama-server reads `content`, and `input` as OpenAI does.
  const char* field = openai || !body.contains("content") ? "input" : "content";
  std::vector<std::vector<int32_t>> inputs;
  if (auto e = ReadInputs(body.contains(field) ? body[field] : json(), field, engine.tokenizer(),
                          vocab, &inputs)) {
    return SendError(out, *e);
  }
  bool base64 = false;
  int64_t norm = 2;
  if (openai) {
    if (const auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
      if (!f->is_string() || (*f != "float" && *f != "base64")) {
        return SendError(out, InvalidField("encoding_format", "expected \"float\" or \"base64\""));
      }
      base64 = *f == "base64";
    }
    std::optional<int64_t> dimensions;
    if (auto e = ReadInt(body, "dimensions", 1, INT32_MAX, &dimensions)) return SendError(out, *e);
    if (dimensions && *dimensions != hidden) {
      return SendError(out, InvalidField("dimensions",
                                         "this model's embeddings have " + std::to_string(hidden) +
                                             " dimensions and cannot be shortened",
                                         "unsupported_dimensions"));
    }
    if (const auto m = body.find("model"); m != body.end() && !m->is_string() && !m->is_null()) {
      return SendError(out, InvalidField("model", "expected a string", "invalid_type"));
    }
  } else {
    std::optional<int64_t> n;
    if (auto e = ReadInt(body, "embd_normalize", -1, 64, &n)) return SendError(out, *e);
    norm = n.value_or(2);
  }

  // Every input runs as its own sequence; all are submitted at once, so the
  // scheduler batches them with each other and with what else runs.
  Pending p;
  p.channel = std::make_shared<EventChannel>(nullptr, inputs.size());
  const EmbeddingPooling pooling = engine.model().config().pooling;
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    prompt_tokens += int64_t(inputs[i].size());
    Request request;
    request.prompt = inputs[i];
    request.embed = pooling;
    request.on_event = [channel = p.channel, i](const RequestEvent& ev) { channel->Push(ev, i); };
    auto handle = model.service->Submit(std::move(request));
    if (!handle.ok()) {
      p.CancelAll();
      p.channel->Close();
      ApiError e = ApiErrorFromStatus(handle.status());
      if (e.param == "prompt") e.param = field;
      if (e.code == "context_length_exceeded") {
        e.message = field + std::string("[") + std::to_string(i) + "]: " + e.message;
        e.extra = {{"n_prompt_tokens", int64_t(inputs[i].size())}, {"n_ctx", model.context}};
      }
      return SendError(out, e);
    }
    p.handles.push_back(*handle);
  }

  std::vector<std::vector<float>> vectors(inputs.size());
  std::optional<ApiError> failure;
  std::deque<TimedEvent> events;
  for (bool ended = false; !ended;) {
    ended = p.channel->Take(kPollInterval, &events);
    for (TimedEvent& te : events) {
      RequestEvent& ev = te.event;
      if (ev.kind == RequestEvent::Kind::kError && !failure) {
        ApiError e;  // the engine's failure, not the request's
        e.status = ev.error_kind == ErrorKind::kUnavailable ? 503 : 500;
        e.type = "server_error";
        e.code = ev.error_code;
        e.message = ev.error;
        failure = std::move(e);
      } else if (ev.kind == RequestEvent::Kind::kDone) {
        vectors[te.choice] = std::move(ev.embedding);
      }
    }
    events.clear();
    if (!ended && out.PeerState() == ResponseStream::Peer::kGone) {
      p.CancelAll();
      p.channel->Close();
      return;
    }
  }
  p.channel->Close();
  if (failure) return SendError(out, *failure);
  for (const auto& v : vectors) {
    if (int64_t(v.size()) != hidden) {  // cancelled (the server is shutting down)
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      e.message = "the request was cancelled before its embeddings were computed";
      return SendError(out, e);
    }
  }

  json result;
  if (openai) {
    json data = json::array();
    for (size_t i = 0; i < vectors.size(); ++i) {
      NormalizeEmbedding(vectors[i], 2);
      json item = {{"object", "embedding"}, {"index", i}};
      item["embedding"] = base64 ? json(EmbeddingBase64(vectors[i])) : json(vectors[i]);
      data.push_back(std::move(item));
    }
    result = {{"object", "list"},
              {"data", std::move(data)},
              {"model", options.model_name},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
  } else {
    // llama-server's shape: one pooled vector per input, as [[...]].
    result = json::array();
    for (size_t i = 0; i < vectors.size(); ++i) {
      NormalizeEmbedding(vectors[i], norm);
      result.push_back({{"index", i}, {"embedding", json::array({vectors[i]})}});
    }
  }
  HttpResponse r;
  r.content_type = "application/json";
  r.body = DumpJson(result);
  out.Send(std::move(r));
}

}  // namespace anymoe
