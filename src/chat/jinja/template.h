// A sandboxed Jinja template: parsed once, rendered many times with bounded
// work (steps), output, allocation and call depth, and without any access to
// files, the network or the host (there is no tag or function that reaches
// them). It implements the subset of jinja2 that real chat templates use,
// with transformers' environment (trim_blocks, lstrip_blocks, loopcontrols,
// tojson as json.dumps, raise_exception, strftime_now); docs/chat.md lists it.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"
#include "core/status.h"

namespace anymoe::jinja {

struct RenderLimits {
  int64_t max_steps = 5'000'000;             // expression and statement evaluations
  size_t max_output_bytes = size_t(16) << 20;
  size_t max_alloc_bytes = size_t(512) << 20;  // bytes of strings and lists created, in total
  int max_call_depth = 64;                   // nested macro calls
};

struct RenderOptions {
  RenderLimits limits;
  // strftime_now's clock; empty: the local time when rendering.
  std::optional<std::tm> now;
};

// The rendered text and the byte ranges of it that came from the caller's
// strings (Value::InputStr), so that they can be tokenized as plain text.
struct RenderedText {
  std::string text;
  std::vector<TextRange> input_ranges;
};

class Template {
 public:
  // Parses `source`; a syntax error is a one-line Status naming the line.
  static Expected<Template> Parse(std::string_view source, const ParseLimits& limits = {});

  // Renders with `variables` (name, value) visible to the template as globals.
  // Errors (the template's raise_exception, a Python error jinja2 would raise,
  // an exhausted budget) are one-line Statuses.
  Expected<RenderedText> Render(const std::vector<std::pair<std::string, Value>>& variables,
                                const RenderOptions& options = {}) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Body> body_;
};
}  // namespace anymoe::jinja
