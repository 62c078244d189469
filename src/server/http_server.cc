#include "server/http_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <future>
#include <thread>

#include "server/handler_pool.h"
#include "server/http_connection.h"

namespace anymoe {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr int kListenBacklog = 1024;  // capped by net.core.somaxconn

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpHandler& h) : options(std::move(o)), handler(h) {
    pool = std::make_unique<HandlerPool>(size_t(std::max(options.handler_threads, 1)),
                                         size_t(std::max(options.max_waiting, 0)));
    core = std::make_unique<ServerCore>(options, handler, *pool, io);
  }

  void Accept() {
    acceptor.async_accept([this](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || core->stopping) return;
      if (ec) {
        // Out of descriptors or memory: try again shortly instead of spinning.
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](error_code e) {
          if (!e) Accept();
        });
        return;
      }
      OnAccepted(std::move(socket));
      Accept();
    });
  }

  void OnAccepted(tcp::socket socket) {
    error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<Connection> victim;
    bool refuse = false;
    {
      std::lock_guard<std::mutex> lock(core->mu);
      if (core->open.size() >= size_t(options.max_connections)) {
        // An idle connection holds nothing a client is waiting for: close the
        // one idle longest to make room; refuse only when none is idle.
        for (Connection* c : core->idle) {
          victim = core->open[c].lock();
          if (victim) break;
        }
        refuse = victim == nullptr;
      }
    }
    if (victim) victim->Close();
    std::make_shared<Connection>(*core, std::move(socket))->Start(refuse);
  }

  void CloseAll() {
    error_code ec;
    acceptor.close(ec);
    retry.cancel();
    std::vector<std::shared_ptr<Connection>> all;
    {
      std::lock_guard<std::mutex> lock(core->mu);
      for (auto& [c, weak] : core->open) {
        if (auto s = weak.lock()) all.push_back(std::move(s));
      }
    }
    for (auto& c : all) c->Close();
  }

  HttpServerOptions options;
  HttpHandler& handler;
  // Destroyed last: connections still owned by queued I/O handlers refer to it.
  std::unique_ptr<ServerCore> core;
  std::unique_ptr<HandlerPool> pool;
  net::io_context io{1};
  tcp::acceptor acceptor{io};
  net::steady_timer retry{io};
  std::thread thread;
  int port = -1;
  bool stopped = false;
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler& handler)
    : impl_(std::make_unique<Impl>(std::move(options), handler)) {}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return impl_->port; }

size_t HttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(impl_->core->mu);
  return impl_->core->open.size();
}

Status HttpServer::Bind() {
  Impl& s = *impl_;
  const std::string where = s.options.host + ":" + std::to_string(s.options.port);
  error_code ec;
  tcp::resolver resolver(s.io);
  const auto endpoints =
      resolver.resolve(s.options.host, std::to_string(s.options.port),
                       tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) {
    return Status::Error("cannot bind to " + where + " (not an address of this machine)");
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  try {  // the constructor form opens the socket (and throws on failure)
    s.acceptor = tcp::acceptor(s.io, endpoint.protocol());
  } catch (const boost::system::system_error& e) {
    ec = e.code();
  }
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(kListenBacklog, ec);
  if (ec) {
    s.acceptor.close(ec);
    return Status::Error("cannot bind to " + where +
                         " (in use, or not an address of this machine)");
  }
  s.port = s.acceptor.local_endpoint(ec).port();
  return Status::Ok();
}

void HttpServer::Start() {
  Impl& s = *impl_;
  s.Accept();
  s.thread = std::thread([&s] {
    // A handler that throws (std::bad_alloc on a huge allocation) must not
    // end the I/O thread: the connection it served is left to its deadline.
    for (;;) {
      try {
        s.io.run();
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "anymoe: http: %s\n", e.what());
      }
    }
  });
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.core->stopping = true;
  if (s.thread.joinable()) {
    std::promise<void> closed;
    net::post(s.io, [&] {
      s.CloseAll();
      closed.set_value();
    });
    closed.get_future().wait();
  } else {
    s.CloseAll();
  }
  s.pool->Shutdown();  // handlers see their sockets shut and end
  s.io.stop();
  if (s.thread.joinable()) s.thread.join();
}

}  // namespace anymoe
