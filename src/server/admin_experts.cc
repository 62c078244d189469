#include "server/admin_experts.h"

#include <charconv>

#include "runtime/engine.h"
#include "runtime/expert_upload.h"
#include "server/completion_service.h"
#include "server/json_fields.h"

namespace anymoe {
namespace {

Status SwapQueryError(const std::string& message) {
  return Status::Error(message, ErrorKind::kInvalidArgument, "invalid_query", "query");
}

// A decimal in [0, 2^31): ids and layers are small.
Expected<int64_t> ParseSwapQueryId(std::string_view s, std::string_view what) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0 || v >= (int64_t(1) << 31)) {
    return SwapQueryError(std::string(what) + " must be a non-negative integer");
  }
  return v;
}

// A query value with its %XX escapes decoded (clients escape the commas of
// the expert list); an error for a malformed escape.
Expected<std::string> PercentDecoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size()) return SwapQueryError("malformed %-escape");
    const auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
    if (ec != std::errc() || end != s.data() + i + 3) return SwapQueryError("malformed %-escape");
    out.push_back(char(v));
    i += 2;
  }
  return out;
}

}  // namespace

Expected<ExpertSwapTarget> ParseExpertSwapQuery(std::string_view target) {
  const size_t q = target.find('?');
  std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  ExpertSwapTarget t;
  bool have_layer = false, have_experts = false;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const size_t eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    ASSIGN_OR_RETURN(const std::string decoded,
                     PercentDecoded(eq == std::string_view::npos ? std::string_view()
                                                                 : pair.substr(eq + 1)));
    const std::string_view value = decoded;
    if (key == "layer" && !have_layer) {
      ASSIGN_OR_RETURN(t.layer, ParseSwapQueryId(value, "layer"));
      have_layer = true;
    } else if (key == "experts" && !have_experts) {
      std::string_view list = value;
      while (true) {
        const size_t comma = list.find(',');
        if (t.experts.size() >= kMaxUploadExperts) {
          return SwapQueryError("experts: at most " + std::to_string(kMaxUploadExperts) + " ids");
        }
        ASSIGN_OR_RETURN(const int64_t e, ParseSwapQueryId(list.substr(0, comma), "each of experts"));
        t.experts.push_back(e);
        if (comma == std::string_view::npos) break;
        list = list.substr(comma + 1);
      }
      have_experts = true;
    } else {
      return SwapQueryError("unknown or repeated query parameter (layer=L&experts=E1,E2,... only)");
    }
  }
  if (!have_layer || !have_experts) return SwapQueryError("the query must name layer=L and experts=E1,...");
  return t;
}

HttpResponse AdminReplaceExperts(const ServingModel& model, const HttpRequest& request) {
  const auto fail = [](const Status& s) {
    HttpResponse r;
    const ApiError e = ApiErrorFromStatus(s);
    r.status = e.status;
    r.content_type = "application/json";
    r.body = ApiErrorJson(e);
    return r;
  };
  Expected<ExpertSwapTarget> target = ParseExpertSwapQuery(request.target);
  if (!target.ok()) return fail(target.status());
  // Shapes are fixed at load: reading them here does not race the forward pass.
  Expected<ReplaceableExperts> shape = model.engine->model().ReplaceableExpertsOf(target->layer);
  if (!shape.ok()) return fail(shape.status());
  Expected<StagedExperts> staged =
      StageExpertUpload(request.body, target->layer, target->experts, *shape);
  if (!staged.ok()) return fail(staged.status());
  const StagedExperts& s = *staged;
  Expected<uint64_t> version =
      model.service->ChangeModel([&s](Model& m) { return ApplyStagedExperts(m, s); });
  if (!version.ok()) return fail(version.status());
  nlohmann::json body = {{"model_version", *version}, {"layer", s.layer}, {"experts", s.experts}};
  HttpResponse r;
  r.content_type = "application/json";
  r.body = body.dump();
  r.SetHeader("X-Model-Version", std::to_string(*version));
  return r;
}

}  // namespace anymoe
