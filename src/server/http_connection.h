// One TCP connection of the HTTP transport (http_server.h), and the state the
// connections share. Internal to src/server. A connection lives on the I/O
// thread while it reads a request (asynchronously, under a deadline), moves to
// a handler thread while its response is written, and comes back to read the
// next one (pipelining, keep-alive) or to close.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "server/handler_pool.h"
#include "server/http_server.h"

namespace anymoe {

class Connection;

// What every connection of one server shares.
struct ServerCore {
  ServerCore(const HttpServerOptions& o, HttpHandler& h, HandlerPool& p, boost::asio::io_context& i)
      : options(o), handler(h), pool(p), io(i) {}

  const HttpServerOptions& options;
  HttpHandler& handler;
  HandlerPool& pool;
  boost::asio::io_context& io;
  std::atomic<bool> stopping{false};

  // Open connections, and those waiting for a request (longest idle first).
  std::mutex mu;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> open;
  std::list<Connection*> idle;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(ServerCore& core, boost::asio::ip::tcp::socket socket);
  ~Connection();

  // I/O thread: starts reading; `refuse` answers 503 at once and closes.
  void Start(bool refuse);
  // I/O thread: ends the connection now (eviction, Stop). A response being
  // written on a handler thread fails its next write.
  void Close();

 private:
  enum class State {
    kIdle,      // waiting for the first byte of a request
    kReading,   // a request under way: its deadline runs
    kHandling,  // on a handler thread; the I/O thread leaves the socket alone
    kWriting,   // writing an answer of the transport's own
    kClosing,   // answer sent, send side shut; discarding input until EOF
    kClosed,
  };
  using Clock = std::chrono::steady_clock;

  void SetState(State s);
  void ReadMore();
  void OnRead(boost::system::error_code ec, size_t n);
  void Parse();
  bool CheckHead();  // false: answered, the request ends here
  void SendContinue();
  void Dispatch();
  void RunHandler(const std::shared_ptr<HttpRequest>& request);  // handler thread
  void AfterResponse(bool reusable);
  void NextRequest();
  // An answer of the transport's (or CheckHeader's), written asynchronously.
  void Answer(HttpResponse response, bool close);
  void Refuse(int status, std::string_view code, std::string_view message);
  void ParseError(boost::system::error_code ec);
  void Linger();
  void Discard();
  void ArmTimer(Clock::time_point deadline);
  void OnTimer();
  HttpRequest HeadOf() const;

  ServerCore& core_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool header_checked_ = false;
  bool read_pending_ = false;
  uint64_t discarded_ = 0;
  std::array<char, 4096> scratch_;
  State state_ = State::kReading;  // Start() makes it idle (and listed as such)
  std::list<Connection*>::iterator idle_at_;
  bool listed_idle_ = false;
  std::string remote_;
  HttpRequest head_;  // the current request's header, for Answered()
};

}  // namespace anymoe
