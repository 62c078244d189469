// The chat page served at GET / (web/index.html, embedded at build time by
// src/server/embed_file.cmake into a generated .cc).
#pragma once

#include <string_view>

namespace anymoe {

std::string_view ChatPageHtml();

}  // namespace anymoe
