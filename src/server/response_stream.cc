#include "server/response_stream.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>

namespace anymoe {
namespace {

using Clock = std::chrono::steady_clock;

// "close" among the comma-separated tokens of a Connection header.
bool HasCloseToken(std::string_view value) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view token = value.substr(0, comma);
    while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
      token.remove_prefix(1);
    while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
    if (EqualsIgnoreCase(token, "close")) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

std::string StatusLine(int status, int version) {
  char line[64];
  std::snprintf(line, sizeof(line), "HTTP/%s %d ", version == 10 ? "1.0" : "1.1", status);
  return std::string(line) + std::string(StatusReason(status)) + "\r\n";
}

void AppendHeaders(const HttpResponse& r, const HttpHeaders& extra, std::string* out) {
  if (!r.content_type.empty()) *out += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [k, v] : extra) {
    if (r.Header(k).empty()) *out += k + ": " + v + "\r\n";
  }
  for (const auto& [k, v] : r.headers) *out += k + ": " + v + "\r\n";
}

}  // namespace

bool RequestAllowsKeepAlive(const HttpRequest& request) {
  if (request.version < 11) return false;
  for (const auto& [k, v] : request.headers) {
    if (EqualsIgnoreCase(k, "Connection") && HasCloseToken(v)) return false;
  }
  return true;
}

std::string SerializeResponse(const HttpResponse& response, int version, bool head_request,
                              bool keep_alive) {
  std::string out = StatusLine(response.status, version);
  AppendHeaders(response, {}, &out);
  if (response.status != 204) {  // 204 carries no Content-Length (RFC 9110 8.6)
    out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  }
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_request) out += response.body;
  return out;
}

ResponseStream::ResponseStream(int fd, const HttpRequest& request,
                               std::chrono::milliseconds write_timeout)
    : fd_(fd),
      request_(request),
      write_timeout_(write_timeout),
      head_request_(request.method == "HEAD"),
      keep_alive_(RequestAllowsKeepAlive(request)) {}

void ResponseStream::AddHeader(std::string name, std::string value) {
  extra_.emplace_back(std::move(name), std::move(value));
}

bool ResponseStream::reusable() const {
  // A client that half-closed may have pipelined more requests before: the
  // connection goes on, and its next read ends it at the end of stream.
  return keep_alive_ && started_ && !failed_ && (!streaming_ || ended_);
}

bool ResponseStream::Send(HttpResponse response) {
  if (started_) return false;
  started_ = true;
  status_ = response.status;
  if (response.close) keep_alive_ = false;
  std::string out = StatusLine(response.status, request_.version);
  AppendHeaders(response, extra_, &out);
  if (response.status != 204) {
    out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  }
  if (!keep_alive_) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_request_) out += response.body;
  ended_ = true;
  return WriteAll(out);
}

bool ResponseStream::Begin(HttpResponse head) {
  if (started_) return false;
  started_ = streaming_ = true;
  status_ = head.status;
  // HTTP/1.0 has no chunked encoding: the body ends when the connection does.
  chunked_ = request_.version >= 11;
  if (!chunked_ || head.close) keep_alive_ = false;
  std::string out = StatusLine(head.status, request_.version);
  AppendHeaders(head, extra_, &out);
  if (chunked_) out += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive_) out += "Connection: close\r\n";
  out += "\r\n";
  return WriteAll(out);
}

bool ResponseStream::Write(std::string_view data) {
  if (!streaming_ || ended_ || failed_) return false;
  if (data.empty() || head_request_) return true;
  if (!chunked_) return WriteAll(data);
  char size[24];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string chunk = size;
  chunk.append(data);
  chunk += "\r\n";
  return WriteAll(chunk);
}

bool ResponseStream::End() {
  if (!streaming_ || ended_) return !failed_;
  ended_ = true;
  if (failed_) return false;
  if (!chunked_ || head_request_) return true;
  return WriteAll("0\r\n\r\n");
}

ResponseStream::Peer ResponseStream::PeerState() {
  if (failed_) return Peer::kGone;
  char c;
  const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return half_closed_ ? Peer::kHalfClosed : Peer::kOpen;
  if (n == 0) {
    half_closed_ = true;
    return Peer::kHalfClosed;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
    return half_closed_ ? Peer::kHalfClosed : Peer::kOpen;
  }
  failed_ = true;  // ECONNRESET and the like
  return Peer::kGone;
}

bool ResponseStream::WriteAll(std::string_view bytes) {
  if (failed_) return false;
  const Clock::time_point deadline = Clock::now() + write_timeout_;
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;  // the client stopped reading
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, int(left.count())) < 0 && errno != EINTR) break;
      continue;
    }
    break;  // EPIPE, ECONNRESET: the client is gone
  }
  if (!bytes.empty()) failed_ = true;
  return !failed_;
}

}  // namespace anymoe
