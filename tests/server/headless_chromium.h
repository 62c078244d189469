// Headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on the child's fd 3, replies on fd 4, each
// message JSON ended by a NUL), so a test waits for the page's own "done"
// state instead of a --virtual-time-budget, which fast-forwards while a reply
// is still streaming and dumped half-finished pages.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace anymoe::testing {

inline std::string FindChromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/snap/bin/"}) {
      const std::string path = std::string(dir) + name;
      if (access(path.c_str(), X_OK) == 0) return path;
    }
  }
  return "";
}

inline std::string Base64Decode(const std::string& in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+')
      v = 62;
    else if (c == '/')
      v = 63;
    else
      continue;  // '=' padding
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  return out;
}

class HeadlessChromium {
 public:
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;

  // Starts the browser with its profile in `profile_dir` (kept between
  // browsers started on the same folder: localStorage survives).
  HeadlessChromium(const std::string& chromium, const std::string& profile_dir,
                   const std::string& log_path) {
    signal(SIGPIPE, SIG_IGN);  // a browser that died fails the call, not the test binary
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      // The child reads commands on fd 3 and writes replies on fd 4.
      dup2(to_child[0], 3);
      dup2(from_child[1], 4);
      const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, 1);
      dup2(log, 2);
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1], log}) {
        if (fd > 4) close(fd);
      }
      const std::string profile = "--user-data-dir=" + profile_dir;
      execl(chromium.c_str(), chromium.c_str(), "--headless", "--disable-gpu", "--no-sandbox",
            "--no-first-run", "--disable-extensions", "--disable-dev-shm-usage",
            "--remote-debugging-pipe", "--window-size=1100,900", profile.c_str(), "about:blank",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    write_fd_ = to_child[1];
    read_fd_ = from_child[0];
  }
  ~HeadlessChromium() {
    if (pid_ <= 0) return;
    Call("Browser.close", json::object(), "", std::chrono::seconds(5));
    close(write_fd_);
    close(read_fd_);
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  // A new tab on `url`; returns its session id ("" on failure).
  std::string Open(const std::string& url) {
    const auto target = Call("Target.createTarget", {{"url", url}});
    if (!target || !target->contains("targetId")) return "";
    const auto session =
        Call("Target.attachToTarget", {{"targetId", (*target)["targetId"]}, {"flatten", true}});
    return session && session->contains("sessionId") ? (*session)["sessionId"].get<std::string>()
                                                     : "";
  }

  // The value of a JavaScript expression in the tab (promises awaited).
  std::optional<json> Evaluate(const std::string& session, const std::string& expression) {
    const auto r = Call(
        "Runtime.evaluate",
        {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, session);
    if (!r || !r->contains("result") || r->contains("exceptionDetails")) return std::nullopt;
    const json& value = (*r)["result"];
    return value.contains("value") ? value["value"] : json();
  }

  // The value of `expression` as a string ("" when it is not one).
  std::string Text(const std::string& session, const std::string& expression) {
    const auto v = Evaluate(session, expression);
    return v && v->is_string() ? v->get<std::string>() : "";
  }

  // Polls until `expression` is true in the tab.
  bool WaitFor(const std::string& session, const std::string& expression,
               std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      const auto v = Evaluate(session, expression);
      if (v && v->is_boolean() && v->get<bool>()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // The tab as a PNG.
  std::string Screenshot(const std::string& session) {
    const auto r = Call("Page.captureScreenshot", {{"format", "png"}}, session);
    return r && r->contains("data") ? Base64Decode((*r)["data"].get<std::string>()) : "";
  }

  bool running() const { return pid_ > 0; }

 private:
  // Sends one command and returns its result (null on error or timeout);
  // events and other replies read meanwhile are dropped.
  std::optional<json> Call(const std::string& method, const json& params,
                           const std::string& session = "",
                           std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    json message = {{"id", ++next_id_}, {"method", method}, {"params", params}};
    if (!session.empty()) message["sessionId"] = session;
    const std::string bytes = message.dump() + '\0';
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n = write(write_fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) return std::nullopt;
      done += size_t(n);
    }
    const auto end = Clock::now() + timeout;
    for (;;) {
      size_t nul;
      while ((nul = buffer_.find('\0')) != std::string::npos) {
        const json reply = json::parse(buffer_.substr(0, nul), nullptr, false);
        buffer_.erase(0, nul + 1);
        if (reply.is_object() && reply.value("id", -1) == next_id_) {
          if (!reply.contains("result")) return std::nullopt;
          return reply["result"];
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{read_fd_, POLLIN, 0};
      if (poll(&p, 1, int(left.count())) <= 0) return std::nullopt;
      char chunk[65536];
      const ssize_t n = read(read_fd_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, size_t(n));
    }
  }

  pid_t pid_ = -1;
  int write_fd_ = -1, read_fd_ = -1;
  int next_id_ = 0;
  std::string buffer_;
};

}  // namespace anymoe::testing
