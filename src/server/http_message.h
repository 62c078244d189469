// An HTTP/1.x request as the server hands it to its handler, and a response
// as a handler describes it. Plain data: the transport (http_server.h) parses
// requests with Boost.Beast and frames responses (Content-Length, chunked or
// close-delimited) itself.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace anymoe {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent ("GET", "POST", ...)
  std::string target;  // as sent: the path and any query
  std::string path;    // the target up to '?'
  int version = 11;    // 10 for HTTP/1.0, 11 for HTTP/1.1
  HttpHeaders headers;
  std::string body;
  std::string remote;  // the peer's address, for logs

  // The first header named `name` (ASCII case-insensitive); "" when absent.
  std::string_view Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
  size_t HeaderCount(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;  // "" : no Content-Type header
  HttpHeaders headers;       // besides Content-Type, Content-Length and Connection
  std::string body;
  bool close = false;  // end the connection after this response

  // Adds `name: value`, replacing an earlier header of that name.
  void SetHeader(std::string name, std::string value);
  std::string_view Header(std::string_view name) const;
};

// ASCII case-insensitive equality, for header names and tokens.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// "OK", "Not Found", ... ("Unknown" for codes without a phrase).
std::string_view StatusReason(int status);

}  // namespace anymoe
