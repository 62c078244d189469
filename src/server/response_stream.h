// How a handler answers one request: a whole response, or a body streamed in
// pieces (chunked on HTTP/1.1, delimited by the connection's close on
// HTTP/1.0, which has no chunked encoding). Writes go straight to the socket
// from the handler's thread, each bounded by the write timeout, so a client
// that stops reading costs one handler thread for that long at most. The
// handler can ask whether the client is still there between writes.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace anymoe {

// The bytes of a whole response with Content-Length framing (no body for a
// HEAD request). `keep_alive` false adds "Connection: close".
std::string SerializeResponse(const HttpResponse& response, int version, bool head_request,
                              bool keep_alive);

// True when `request` lets its connection carry another request after the
// response: HTTP/1.1 without "Connection: close".
bool RequestAllowsKeepAlive(const HttpRequest& request);

class ResponseStream {
 public:
  // What the client's side of the connection looks like.
  enum class Peer {
    kOpen,        // connected (or has sent more requests: pipelining)
    kHalfClosed,  // sent its end of stream: it may still read our answer
    kGone,        // reset, or a write failed: nobody reads any more
  };

  // `fd` stays owned by the connection; `request` must outlive this stream.
  ResponseStream(int fd, const HttpRequest& request, std::chrono::milliseconds write_timeout);

  // Added to whichever response goes out (CORS headers, set before routing).
  void AddHeader(std::string name, std::string value);

  // A whole response. False when it could not be written.
  bool Send(HttpResponse response);
  // The status and headers of a body of unknown length; then Write pieces and
  // End. A zero-length Write sends nothing.
  bool Begin(HttpResponse head);
  bool Write(std::string_view data);
  bool End();

  // Peeks at the socket without consuming anything: end of stream from the
  // client reads as kHalfClosed until a write shows it gone (the first write
  // to a closed peer makes it answer with a reset).
  Peer PeerState();

  bool started() const { return started_; }  // the status line is out
  int status() const { return status_; }
  bool failed() const { return failed_; }
  // The connection can carry another request after this response.
  bool reusable() const;

 private:
  bool WriteAll(std::string_view bytes);

  int fd_;
  const HttpRequest& request_;
  std::chrono::milliseconds write_timeout_;
  HttpHeaders extra_;
  bool head_request_;
  bool keep_alive_;
  bool started_ = false;
  bool streaming_ = false;
  bool chunked_ = false;
  bool ended_ = false;
  bool failed_ = false;
  bool half_closed_ = false;
  int status_ = 0;
};

}  // namespace anymoe
