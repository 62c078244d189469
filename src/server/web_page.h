// The chat page served at GET / (web/index.html) and the libraries it loads
// from /static/ (Debian's marked and DOMPurify), embedded at build time by
// src/server/embed_file.cmake into generated .cc files.
#pragma once

#include <string_view>

namespace anymoe {

std::string_view ChatPageHtml();
std::string_view MarkedJs();     // Markdown to HTML
std::string_view DomPurifyJs();  // HTML sanitizer: the model's Markdown may carry any HTML

}  // namespace anymoe
