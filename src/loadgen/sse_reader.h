// Incremental Server-Sent Events parser for streamed OpenAI responses: bytes
// arrive in arbitrary pieces, lines end in LF or CRLF; each complete event's
// data (its "data:" lines joined by LF) is handed out once. Comment lines (": ping") and other
// fields are skipped. Used by bench-serve and by the server tests.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace anymoe {

class SseReader {
 public:
  // Appends `bytes` and calls `on_data` for every event completed by them.
  void Feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_data);
  // Bytes of an unfinished line or event still held.
  size_t pending() const { return buffer_.size() + data_.size(); }

 private:
  std::string buffer_;  // the unfinished line
  std::string data_;    // data lines of the unfinished event
  bool has_data_ = false;
};

}  // namespace anymoe
