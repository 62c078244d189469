// Raw-socket HTTP for transport tests: what a hostile or unusual client sends
// (pipelined requests, half-closes, bad lengths, trickled bytes, HTTP/1.0),
// byte for byte, and a reader that splits what comes back into responses.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace anymoe::testing {

inline int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

// Appends what arrives within `timeout` to `out`; stops early at the peer's
// close (returns true) or when `done(out)` says enough.
template <typename Done>
bool ReadUntil(int fd, std::string* out, std::chrono::milliseconds timeout, Done done) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  char buf[8192];
  while (!done(*out)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
    out->append(buf, size_t(n));
  }
  return false;
}

// Everything until the server closes the connection (or `timeout`).
inline std::string ReadToClose(int fd,
                               std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  std::string out;
  ReadUntil(fd, &out, timeout, [](const std::string&) { return false; });
  return out;
}

struct RawResponse {
  int status = 0;
  std::string version;  // "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // de-chunked
  bool chunked = false;
  std::string Header(std::string_view name) const {
    for (const auto& [k, v] : headers) {
      if (k.size() == name.size() &&
          std::equal(k.begin(), k.end(), name.begin(),
                     [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
        return v;
      }
    }
    return "";
  }
};

// Splits the first complete response off the front of `data`. A body without
// length or chunking runs to the end of `data` (the connection's close).
// Returns false while the response is incomplete.
inline bool TakeResponse(std::string* data, RawResponse* r) {
  const size_t head_end = data->find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  const std::string head = data->substr(0, head_end);
  RawResponse out;
  size_t line_end = head.find("\r\n");
  const std::string status_line = head.substr(0, line_end);
  out.version = status_line.substr(0, status_line.find(' '));
  out.status = std::atoi(status_line.c_str() + status_line.find(' ') + 1);
  while (line_end != std::string::npos) {
    const size_t start = line_end + 2;
    line_end = head.find("\r\n", start);
    const std::string line =
        head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    out.headers.emplace_back(line.substr(0, colon), value);
  }
  size_t pos = head_end + 4;
  if (out.status == 100) {  // interim: the final response follows
    data->erase(0, pos);
    *r = out;
    return true;
  }
  if (!out.Header("Content-Length").empty()) {
    const size_t n = std::strtoull(out.Header("Content-Length").c_str(), nullptr, 10);
    if (data->size() < pos + n) return false;
    out.body = data->substr(pos, n);
    pos += n;
  } else if (out.Header("Transfer-Encoding") == "chunked") {
    out.chunked = true;
    for (;;) {
      const size_t size_end = data->find("\r\n", pos);
      if (size_end == std::string::npos) return false;
      const size_t n = std::strtoull(data->c_str() + pos, nullptr, 16);
      if (data->size() < size_end + 2 + n + 2) return false;
      out.body += data->substr(size_end + 2, n);
      pos = size_end + 2 + n + 2;
      if (n == 0) break;
    }
  } else if (out.status != 204) {
    out.body = data->substr(pos);
    pos = data->size();
  }
  data->erase(0, pos);
  *r = out;
  return true;
}

// One request on a new connection; the first response (waits up to `timeout`).
inline RawResponse Exchange(int port, const std::string& request,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5),
                            bool half_close = false) {
  RawResponse r;
  const int fd = ConnectTo(port);
  if (fd < 0) return r;
  SendAll(fd, request);
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string data;
  ReadUntil(fd, &data, timeout, [&](const std::string& d) {
    std::string copy = d;
    RawResponse probe;
    return TakeResponse(&copy, &probe) && probe.status != 100 &&
           (!probe.Header("Content-Length").empty() || probe.chunked);
  });
  ::close(fd);
  TakeResponse(&data, &r);
  return r;
}

inline std::string RawPost(const std::string& path, const std::string& body,
                           const std::string& extra_headers = "",
                           const char* version = "HTTP/1.1") {
  return "POST " + path + " " + version +
         "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline std::string RawGet(const std::string& path, const std::string& extra_headers = "",
                          const char* version = "HTTP/1.1") {
  return "GET " + path + " " + version + "\r\nHost: 127.0.0.1\r\n" + extra_headers + "\r\n";
}

}  // namespace anymoe::testing
