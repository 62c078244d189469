#include "runtime/text_stream.h"

#include <algorithm>

#include "tokenizer/unicode_class.h"

namespace anymoe {

TextStream::TextStream(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

size_t TextStream::HeldBackTail(size_t end) const {
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, end - released_);
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(text_).substr(end - len, len) == std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

std::string TextStream::Append(std::string_view bytes) {
  if (stopped_) return "";
  text_.append(bytes);
  // Held-back tails guarantee a stop string cannot start inside released text.
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t pos = text_.find(stop, released_);
    if (pos != std::string::npos && pos < cut) cut = pos;
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    text_.resize(cut);
    std::string out = text_.substr(released_);
    released_ = text_.size();
    return out;
  }
  size_t end = CompleteUtf8PrefixLength(text_);
  if (end < released_) end = released_;
  end -= HeldBackTail(end);
  std::string out = text_.substr(released_, end - released_);
  released_ = end;
  return out;
}

std::string TextStream::Flush() {
  std::string out = text_.substr(released_);
  released_ = text_.size();
  return out;
}

}  // namespace anymoe
