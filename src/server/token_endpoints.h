// llama-server's tokenizer routes, for debugging a deployment and for tools
// written against llama-server: POST /tokenize (text -> ids, optionally with
// each id's piece) and POST /detokenize (ids -> text), in its request and
// response shapes, with the model's own tokenizer.
#pragma once

#include "server/http_message.h"
#include "server/response_stream.h"
#include "server/server_options.h"

namespace anymoe {

class Tokenizer;

// {"content": string, "add_special": bool = false, "parse_special": bool =
// true, "with_pieces": bool = false} -> {"tokens": [id, ...]}, or with pieces
// {"tokens": [{"id": id, "piece": text}, ...]} where a piece that is not valid
// UTF-8 on its own (part of a character) is its bytes as an array of numbers.
void HandleTokenize(const ServerOptions& options, const Tokenizer& tokenizer,
                    const HttpRequest& req, ResponseStream& out);

// {"tokens": [id, ...]} -> {"content": text}; ids outside the vocabulary are a 400.
void HandleDetokenize(const ServerOptions& options, const Tokenizer& tokenizer, int64_t vocab_size,
                      const HttpRequest& req, ResponseStream& out);

}  // namespace anymoe
