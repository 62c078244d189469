// Slow clients (issue 20, defect 5): 64 connections trickle a byte a second
// for 20 s while ordinary requests, with and without the API key, must each
// be answered within a second. Reading requests never takes a handler thread
// and every request has a whole-request deadline, so the tricklers cost the
// server nothing but their sockets, and it drops them at the deadline (408).
#include <atomic>

#include "raw_http.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Keeps `count` connections sending one byte of a request per second each;
// a connection the server closes is replaced. Counts the 408s it receives.
class Tricklers {
 public:
  Tricklers(int port, int count) : port_(port), fds_(size_t(count), -1) {}
  ~Tricklers() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  void Run(std::chrono::seconds duration) {
    const std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n"
        "Content-Length: 100\r\n\r\n" +
        std::string(100, ' ');
    std::vector<size_t> sent(fds_.size(), 0);
    const auto end = Clock::now() + duration;
    while (Clock::now() < end) {
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i] < 0) {
          fds_[i] = ConnectTo(port_);
          sent[i] = 0;
          ++connections_;
        }
        std::string got;
        char buf[4096];
        ssize_t n;
        while ((n = ::recv(fds_[i], buf, sizeof(buf), MSG_DONTWAIT)) > 0)
          got.append(buf, size_t(n));
        if (got.find(" 408 ") != std::string::npos) ++timeouts_;
        if (n == 0 || !got.empty() || sent[i] >= request.size() ||
            !SendAll(fds_[i], request.substr(sent[i]++, 1))) {
          ::close(fds_[i]);  // answered or dropped: a new one takes its place
          fds_[i] = -1;
        }
      }
      std::this_thread::sleep_for(1s);
    }
  }
  int timeouts() const { return timeouts_; }
  int connections() const { return connections_; }

 private:
  int port_;
  std::vector<int> fds_;
  int timeouts_ = 0;
  int connections_ = 0;
};

class SlowClients : public ServerTest {};

TEST_F(SlowClients, SixtyFourTricklersDoNotDelayOtherRequests) {
  // With a key and the default limits.
  ServerOptions o;
  o.api_key = "k";
  o.http_threads = 8;  // fewer handler threads than tricklers: none of them may hold one
  StartServer(o);
  const int port = server_->port();

  Tricklers tricklers(port, 64);
  std::thread trickle([&] { tricklers.Run(20s); });
  std::this_thread::sleep_for(2s);  // every trickler connected and under way

  int checks = 0;
  double slowest = 0;
  const auto timed = [&](const std::string& request, int want) {
    const auto start = Clock::now();
    const RawResponse r = Exchange(port, request, 5s);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    slowest = std::max(slowest, seconds);
    EXPECT_EQ(r.status, want) << request.substr(0, 60);
    EXPECT_LT(seconds, 1.0) << request.substr(0, 60);
    ++checks;
  };
  const std::string completion = json{{"prompt", "hi"}, {"max_tokens", 4}}.dump();
  const auto end = Clock::now() + 16s;
  while (Clock::now() < end) {
    timed(RawGet("/health"), 200);
    timed(RawGet("/v1/models"), 401);
    timed(RawGet("/v1/models", "Authorization: Bearer k\r\n"), 200);
    timed(RawPost("/v1/completions", completion), 401);
    timed(RawPost("/v1/completions", completion, "X-Api-Key: k\r\n"), 200);
    std::this_thread::sleep_for(200ms);
  }
  trickle.join();
  std::printf("slow clients: %d checks, slowest %.3f s; %d trickler connections, %d got 408\n",
              checks, slowest, tricklers.connections(), tricklers.timeouts());
  EXPECT_GE(checks, 40);
  // The default 10 s request deadline dropped the first wave of tricklers.
  EXPECT_GE(tricklers.timeouts(), 32);
}

}  // namespace
}  // namespace anymoe::testing
