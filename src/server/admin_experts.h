// POST /admin/experts (serve --admin-key KEY): replaces the weights of routed
// experts of one layer in the running server (docs/server.md, "Live expert
// swap"). The body is a GGUF file (raw, Content-Type application/octet-stream);
// the query names the layer and the experts: ?layer=L&experts=E1,E2,...
// The upload is validated and staged on the HTTP thread, then swapped in by
// the scheduler between steps (Scheduler::ChangeModel: a drain).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/api_error.h"
#include "server/http_message.h"
#include "server/server_options.h"

namespace anymoe {

// The query's layer and expert ids; an error with code invalid_query.
struct ExpertSwapTarget {
  int64_t layer = 0;
  std::vector<int64_t> experts;
};
Expected<ExpertSwapTarget> ParseExpertSwapQuery(std::string_view target);

// The answer to one upload: 200 {"model_version": N, "layer": L, "experts":
// [...]} once applied, else the error (400 with its code for a bad upload,
// 503 when the server is stopping).
HttpResponse AdminReplaceExperts(const ServingModel& model, const HttpRequest& request);

}  // namespace anymoe
