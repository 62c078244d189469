#include "server/http_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/error.hpp>

namespace anymoe {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kReadChunk = 16 << 10;

bool TakesBody(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

}  // namespace

Connection::Connection(ServerCore& core, tcp::socket socket)
    : core_(core), socket_(std::move(socket)), timer_(core.io) {
  error_code ec;
  const tcp::endpoint peer = socket_.remote_endpoint(ec);
  if (!ec) remote_ = peer.address().to_string();
}

Connection::~Connection() {
  std::lock_guard<std::mutex> lock(core_.mu);
  if (listed_idle_) core_.idle.erase(idle_at_);
  core_.open.erase(this);
}

void Connection::SetState(State s) {
  if (s == state_) return;
  std::lock_guard<std::mutex> lock(core_.mu);
  if (listed_idle_) {
    core_.idle.erase(idle_at_);
    listed_idle_ = false;
  }
  if (s == State::kIdle) {
    idle_at_ = core_.idle.insert(core_.idle.end(), this);
    listed_idle_ = true;
  }
  state_ = s;
}

void Connection::Start(bool refuse) {
  {
    std::lock_guard<std::mutex> lock(core_.mu);
    core_.open[this] = weak_from_this();
  }
  head_.version = 11;
  if (refuse) {
    state_ = State::kReading;
    return Refuse(503, "too_many_connections", "too many connections; retry later");
  }
  SetState(State::kIdle);
  // A new connection gets the whole request deadline for its first byte
  // (browsers open connections ahead of use); idle ones are the first to go
  // when the connection limit is reached.
  ArmTimer(Clock::now() + core_.options.request_timeout);
  ReadMore();
}

void Connection::Close() {
  if (state_ == State::kClosed) return;
  const State was = state_;
  SetState(State::kClosed);
  ++timer_generation_;
  timer_.cancel();
  if (was == State::kHandling) {
    // The handler thread owns the socket: make its next write fail; the
    // socket is closed when it hands the connection back.
    ::shutdown(socket_.native_handle(), SHUT_RDWR);
    return;
  }
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void Connection::ArmTimer(Clock::time_point deadline) {
  const uint64_t generation = ++timer_generation_;
  timer_.expires_at(deadline);
  timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
    if (ec || generation != self->timer_generation_) return;
    self->OnTimer();
  });
}

void Connection::OnTimer() {
  switch (state_) {
    case State::kIdle:  // nothing asked: close quietly
      return Close();
    case State::kReading:
      return Refuse(408, "request_timeout",
                    "the request was not complete within the request timeout");
    case State::kWriting:  // the client stopped reading
    case State::kClosing:
      return Close();
    case State::kHandling:
    case State::kClosed:
      return;
  }
}

void Connection::ReadMore() {
  read_pending_ = true;
  socket_.async_read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this()](error_code ec, size_t n) { self->OnRead(ec, n); });
}

void Connection::OnRead(error_code ec, size_t n) {
  read_pending_ = false;
  if (state_ != State::kIdle && state_ != State::kReading) return;  // aborted for an answer
  if (ec) {
    if (ec == net::error::eof && state_ == State::kReading) {
      // The client ended its side mid-request (a body shorter than its
      // Content-Length, a cut header): it may still read an answer.
      return Refuse(400, "incomplete_request",
                    "the connection ended before the request was complete");
    }
    return Close();
  }
  buffer_.commit(n);
  if (state_ == State::kIdle) {
    SetState(State::kReading);
    ArmTimer(Clock::now() + core_.options.request_timeout);  // whole request from its first byte
  }
  Parse();
}

void Connection::Parse() {
  if (!parser_) {
    parser_.emplace();
    parser_->header_limit(std::uint32_t(core_.options.max_header_bytes));
    parser_->body_limit(core_.options.max_body_bytes);
    header_checked_ = false;
  }
  while (buffer_.size() > 0) {
    error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) return ParseError(ec);
    if (!header_checked_ && parser_->is_header_done()) {
      header_checked_ = true;
      if (!CheckHead()) return;
      if (!parser_->is_done() && buffer_.size() == 0 && head_.version >= 11 &&
          EqualsIgnoreCase(head_.Header("Expect"), "100-continue")) {
        return SendContinue();
      }
    }
    if (parser_->is_done()) return Dispatch();
    if (used == 0) break;
  }
  if (!header_checked_ && buffer_.size() > core_.options.max_header_bytes) {
    return Refuse(431, "header_too_large", "the request header is larger than the limit");
  }
  ReadMore();
}

void Connection::ParseError(error_code ec) {
  if (ec == http::error::header_limit) {
    // A request line longer than the whole header allowance is a long URI.
    const auto* data = static_cast<const char*>(buffer_.data().data());
    const std::string_view start(data, buffer_.size());
    if (start.find("\r\n") == std::string_view::npos) {
      return Refuse(414, "uri_too_long", "the request target is longer than the limit");
    }
    return Refuse(431, "header_too_large", "the request header is larger than the limit");
  }
  if (ec == http::error::body_limit) {
    return Refuse(413, "request_too_large", "the request body is larger than the limit");
  }
  if (ec == http::error::bad_content_length) {
    return Refuse(400, "bad_content_length",
                  "Content-Length is not one non-negative integer in range (or two differ)");
  }
  if (ec == http::error::bad_transfer_encoding) {
    return Refuse(411, "length_required",
                  "a request body needs a Content-Length header (chunked bodies are refused)");
  }
  return Refuse(400, "bad_request", "malformed HTTP request");
}

HttpRequest Connection::HeadOf() const {
  const auto& m = parser_->get();
  HttpRequest r;
  r.method = std::string(m.method_string());
  r.target = std::string(m.target());
  r.path = r.target.substr(0, r.target.find('?'));
  r.version = int(m.version());
  for (const auto& field : m) {
    r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  r.remote = remote_;
  return r;
}

bool Connection::CheckHead() {
  head_ = HeadOf();
  const HttpServerOptions& o = core_.options;
  if (head_.target.size() > o.max_target_bytes) {
    Refuse(414, "uri_too_long", "the request target is longer than the limit");
    return false;
  }
  if (head_.headers.size() > o.max_header_count) {
    Refuse(431, "too_many_headers",
           "the request has more than " + std::to_string(o.max_header_count) + " header fields");
    return false;
  }
  if (head_.version >= 11 && !head_.HasHeader("Host")) {
    Refuse(400, "missing_host", "an HTTP/1.1 request needs a Host header");
    return false;
  }
  std::optional<uint64_t> length;
  if (const auto declared = parser_->content_length()) length = *declared;
  if (head_.HasHeader("Transfer-Encoding") || (TakesBody(head_.method) && !length)) {
    Refuse(411, "length_required",
           "a request body needs a Content-Length header (chunked bodies are refused)");
    return false;
  }
  if (!TakesBody(head_.method) && length.value_or(0) != 0) {
    Refuse(400, "unexpected_body", "a " + head_.method + " request has no body");
    return false;
  }
  std::optional<HttpResponse> answer = core_.handler.CheckHeader(head_);
  if (answer) {
    // A body we will not read: close after answering, so its bytes are
    // never taken for the next request.
    const bool unread_body = length.value_or(0) > 0;
    Answer(std::move(*answer), unread_body);
    return false;
  }
  return true;
}

void Connection::SendContinue() {
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                   [self = shared_from_this()](error_code ec, size_t) {
                     if (self->state_ != State::kReading) return;
                     if (ec) return self->Close();
                     self->ReadMore();
                   });
}

void Connection::Dispatch() {
  SetState(State::kHandling);
  ++timer_generation_;
  timer_.cancel();
  auto request = std::make_shared<HttpRequest>(std::move(head_));
  request->body = std::move(parser_->get().body());
  parser_.reset();
  head_ = HttpRequest();
  head_.version = request->version;
  auto self = shared_from_this();
  if (!core_.pool.TrySubmit([self, request] { self->RunHandler(request); })) {
    head_ = *request;
    SetState(State::kReading);
    Refuse(503, "too_many_connections", "too many requests in progress; retry later");
  }
}

void Connection::RunHandler(const std::shared_ptr<HttpRequest>& request) {
  // The fd is stable while this connection is in kHandling.
  ResponseStream out(socket_.native_handle(), *request, core_.options.write_timeout);
  try {
    core_.handler.Handle(*request, out);
  } catch (...) {  // handlers return errors as responses; never let one end the process
  }
  if (!out.started()) out.Send(core_.handler.Refusal(500, "", "internal server error"));
  core_.handler.Answered(*request, out.status());
  const bool reusable = out.reusable();
  net::post(core_.io, [self = shared_from_this(), reusable] { self->AfterResponse(reusable); });
}

void Connection::AfterResponse(bool reusable) {
  if (state_ == State::kClosed) {
    error_code ec;
    socket_.close(ec);
    return;
  }
  if (reusable && !core_.stopping) return NextRequest();
  Linger();
}

void Connection::NextRequest() {
  parser_.reset();
  head_ = HttpRequest();
  head_.version = 11;
  if (buffer_.size() > 0) {  // pipelined: the next request is here already
    SetState(State::kReading);
    ArmTimer(Clock::now() + core_.options.request_timeout);
    return Parse();
  }
  SetState(State::kIdle);
  ArmTimer(Clock::now() + core_.options.keep_alive_timeout);
  ReadMore();
}

void Connection::Answer(HttpResponse response, bool close) {
  core_.handler.Answered(head_, response.status);
  const bool keep = !close && !response.close && RequestAllowsKeepAlive(head_) && !core_.stopping;
  auto bytes = std::make_shared<std::string>(
      SerializeResponse(response, head_.version >= 11 ? 11 : 10, head_.method == "HEAD", keep));
  if (read_pending_) {  // the answer replaces the read (a timeout)
    error_code ec;
    socket_.cancel(ec);
  }
  SetState(State::kWriting);
  ArmTimer(Clock::now() + core_.options.write_timeout);
  net::async_write(socket_, net::buffer(*bytes),
                   [self = shared_from_this(), bytes, keep](error_code ec, size_t) {
                     if (self->state_ != State::kWriting) return;
                     if (ec) return self->Close();
                     if (keep) return self->NextRequest();
                     self->Linger();
                   });
}

void Connection::Refuse(int status, std::string_view code, std::string_view message) {
  HttpResponse r = core_.handler.Refusal(status, code, message);
  if (status == 503) r.SetHeader("Retry-After", "1");
  Answer(std::move(r), /*close=*/true);
}

// Closing with unread input makes the kernel send a reset, which can destroy
// the answer before the client reads it: shut the send side, read and drop
// what still comes for a moment, then close.
void Connection::Linger() {
  SetState(State::kClosing);
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return Close();
  ArmTimer(Clock::now() + core_.options.linger);
  discarded_ = 0;
  Discard();
}

void Connection::Discard() {
  socket_.async_read_some(
      net::buffer(scratch_), [self = shared_from_this()](error_code ec, size_t n) {
        if (self->state_ != State::kClosing) return;
        self->discarded_ += n;
        // A client still sending an oversized body must get to read the answer:
        // drop up to a generous cap within the linger time, then close.
        const uint64_t cap = std::max<uint64_t>(64 << 20, 4 * self->core_.options.max_body_bytes);
        if (ec || self->discarded_ > cap) return self->Close();
        self->Discard();
      });
}

}  // namespace anymoe
