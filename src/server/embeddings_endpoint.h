// POST /v1/embeddings (OpenAI's shape) and POST /embeddings (llama-server's):
// each input's tokens run through the model on the scheduler, batched with
// whatever else runs, and come back as one vector: the final-normed hidden
// states of all its positions pooled as the model says (mean unless its GGUF
// names cls or last pooling), then normalised (OpenAI: L2, always;
// llama-server: embd_normalize, L2 by default).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "server/http_message.h"
#include "server/response_stream.h"
#include "server/server_options.h"

namespace anymoe {

// llama-server's embd_normalize: -1 none, 0 max-abs scaled to int16 range
// (32760), 1 taxicab, 2 Euclidean, p > 2 the p-norm. In place.
void NormalizeEmbedding(std::span<float> v, int64_t norm);

// Little-endian float32 bytes in base64 (OpenAI's encoding_format "base64").
std::string EmbeddingBase64(std::span<const float> v);

// `openai`: the /v1/embeddings request and response shape, else llama-server's.
void HandleEmbeddings(const ServerOptions& options, const ServingModel& model, bool openai,
                      const HttpRequest& req, ResponseStream& out);

}  // namespace anymoe
