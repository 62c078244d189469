#include "loadgen/sse_reader.h"

namespace anymoe {

void SseReader::Feed(std::string_view bytes,
                     const std::function<void(std::string_view data)>& on_data) {
  buffer_.append(bytes);
  size_t start = 0;
  for (size_t end; (end = buffer_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(buffer_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {  // a blank line ends the event
      if (has_data_) on_data(data_);
      data_.clear();
      has_data_ = false;
    } else if (line.substr(0, 5) == "data:") {
      std::string_view value = line.substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
    // Comments (":...") and other fields (event:, id:, retry:) are skipped.
  }
  buffer_.erase(0, start);
}

}  // namespace anymoe
