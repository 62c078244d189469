// `anymoe serve` as a process: greedy output through the server equals what
// `anymoe run --temp 0` prints for the same prompt (alone and while 8 other
// requests run), SIGTERM drains running streams and exits 0, a second signal
// exits at once, and a non-loopback bind without a key is refused. Also the
// chat page end to end in headless Chromium (skipped when it is not installed).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>

#include "headless_chromium.h"
#include "server/sse.h"
#include "child_process.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class ServeBinary : public ServerTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("anymoe_serve_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    serve_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Starts `anymoe serve` on a free port and waits until it is ready.
  void StartServe(std::vector<std::string> extra = {},
                  const std::string& model = GoldenPath("llama_tiny")) {
    std::vector<std::string> args = {ANYMOE_BINARY, "serve", "-m", model, "--port", "0", "-t", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    serve_ = std::make_unique<Process>(args, Path("serve.out"), Path("serve.err"));
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    ASSERT_TRUE(Eventually(
        [&] {
          std::smatch m;
          const std::string err = serve_->err();
          if (!std::regex_search(err, m, listening)) return false;
          port_ = std::stoi(m[1]);
          return err.find("anymoe: ready") != std::string::npos;
        },
        std::chrono::seconds(10)))
        << serve_->err();
  }

  std::unique_ptr<httplib::Client> Http() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(30);
    return c;
  }

  StreamResult StreamFrom(const json& body) {
    return StreamRequest(*Http(), "/v1/completions", body);
  }

  std::filesystem::path dir_;
  std::unique_ptr<Process> serve_;
  int port_ = 0;
};

TEST_F(ServeBinary, GreedyOutputEqualsAnymoeRun) {
  const std::string prompt = "Hello, my name is";
  Process run({ANYMOE_BINARY, "run", "-m", GoldenPath("llama_tiny"), "-p", prompt, "--temp", "0",
               "-n", "48", "-t", "1"},
              Path("run.out"), Path("run.err"));
  ASSERT_EQ(run.Wait(std::chrono::seconds(20)), 0) << run.err();
  std::string printed = run.out();
  ASSERT_FALSE(printed.empty());
  ASSERT_EQ(printed.back(), '\n');  // run ends its text with a newline
  printed.pop_back();
  const std::string expected = json::parse(DumpJson(json(printed))).get<std::string>();

  StartServe({"--parallel", "9"});
  // Not given, the prefill depth unit comes from the model's shapes (> 0: on).
  EXPECT_TRUE(std::regex_search(serve_->err(), std::regex("prefill depth unit [1-9][0-9]*\n")))
      << serve_->err();
  const json request = {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}};
  auto res = Http()->Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], expected);

  // The same request while 8 others run in the same batches.
  std::vector<std::future<StreamResult>> others;
  for (int i = 0; i < 8; ++i) {
    others.push_back(std::async(std::launch::async, [this, i] {
      return StreamFrom({{"prompt", "a different prompt " + std::to_string(i * 7)},
                         {"max_tokens", 80},
                         {"temperature", 0.9},
                         {"seed", i},
                         {"ignore_eos", true}});
    }));
  }
  const StreamResult under_load = StreamFrom(request);
  EXPECT_EQ(under_load.text, expected);
  res = Http()->Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], expected);
  for (auto& f : others) EXPECT_TRUE(f.get().done);
}

// Real-file smoke (issue 47): a tiny random Mixtral carrying the real
// Mixtral-8x7B tokenizer and chat template. `run --chat` and `serve` render the
// real template, tokenize it with the SentencePiece model to llama.cpp's ids for
// that prompt (tools/gen_sentencepiece_golden.py, HF's legacy pipeline) and
// greedy-decode the same text.
TEST_F(ServeBinary, RealMixtralTokenizerChatThroughRunAndServe) {
  const std::string model = GoldenPath("moe_gguf/mixtral_real_vocab.gguf");
  const json golden = json::parse(std::ifstream(GoldenPath("tokenizer/mixtral.golden.json")));
  const json& chat = golden["chat"][0];
  ASSERT_EQ(chat["messages"].size(), 1u);
  const std::string question = chat["messages"][0]["content"];
  const size_t prompt_tokens = chat["legacy_ids"].size();
  Process run({ANYMOE_BINARY, "run", "-m", model, "--chat", "-p", question, "--temp", "0", "-n",
               "8", "--ignore-eos", "-t", "1"},
              Path("run.out"), Path("run.err"));
  ASSERT_EQ(run.Wait(std::chrono::seconds(20)), 0) << run.err();
  EXPECT_NE(run.err().find("prompt: " + std::to_string(prompt_tokens) + " tokens"),
            std::string::npos)
      << run.err();
  std::string printed = run.out();
  ASSERT_FALSE(printed.empty());
  printed.pop_back();  // run ends its text with a newline

  StartServe({}, model);
  const json request = {{"messages", chat["messages"]},
                        {"max_tokens", 8},
                        {"temperature", 0},
                        {"ignore_eos", true}};
  auto res = Http()->Post("/v1/chat/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json body = json::parse(res->body);
  EXPECT_EQ(body["usage"]["prompt_tokens"], prompt_tokens) << res->body;
  EXPECT_EQ(body["usage"]["completion_tokens"], 8) << res->body;
  EXPECT_EQ(body["choices"][0]["message"]["content"], printed) << res->body;
}

// serve --spec mtp loads the model's MTP layer and drafts with it: the
// replies are `anymoe run --temp 0`'s, also while other requests run, and the
// drafts are counted on /metrics.
TEST_F(ServeBinary, MtpSpeculationKeepsAnymoeRunsOutput) {
  const std::string model = GoldenPath("mtp/glm_moe_dsa_mtp.gguf");
  const std::string prompt = "Hello, my name is";
  Process run({ANYMOE_BINARY, "run", "-m", model, "-p", prompt, "--temp", "0", "-n", "24", "-t",
               "1", "--ignore-eos"},
              Path("run.out"), Path("run.err"));
  ASSERT_EQ(run.Wait(std::chrono::seconds(20)), 0) << run.err();
  std::string printed = run.out();
  ASSERT_FALSE(printed.empty());
  printed.pop_back();  // run ends its text with a newline
  const std::string expected = json::parse(DumpJson(json(printed))).get<std::string>();

  StartServe({"--spec", "mtp", "--draft", "2", "--draft-min-accept", "0", "--parallel", "4"},
             model);
  EXPECT_NE(serve_->err().find("MTP layer"), std::string::npos) << serve_->err();
  const json request = {
      {"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  std::vector<std::future<StreamResult>> others;
  for (int i = 0; i < 3; ++i) {
    others.push_back(std::async(std::launch::async, [this, i] {
      return StreamFrom({{"prompt", "another prompt " + std::to_string(i)},
                         {"max_tokens", 30},
                         {"temperature", 0.8},
                         {"seed", i},
                         {"ignore_eos", true}});
    }));
  }
  EXPECT_EQ(StreamFrom(request).text, expected);
  for (auto& f : others) EXPECT_TRUE(f.get().done);
  // The scheduler publishes its counters after the step: they may trail the reply.
  std::string metrics;
  EXPECT_TRUE(Eventually([&] {
    auto res = Http()->Get("/metrics");
    metrics = res ? res->body : "";
    std::smatch m;
    return std::regex_search(metrics, m, std::regex("anymoe_spec_draft_tokens_total ([0-9]+)")) &&
           std::stoll(m[1]) > 0;
  })) << metrics;
}

TEST_F(ServeBinary, SigtermDrainsRunningStreamsAndExitsZero) {
  StartServe({"--debug-token-delay-ms", "10", "--shutdown-timeout", "10"});
  std::vector<std::future<StreamResult>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::async(std::launch::async, [this] {
      return StreamFrom({{"prompt", "drain me"}, {"max_tokens", 30}, {"ignore_eos", true}});
    }));
  }
  // Wait until all four are generating.
  ASSERT_TRUE(Eventually([&] {
    auto m = Http()->Get("/metrics");
    return m && m->body.find("anymoe_requests_running 4") != std::string::npos;
  })) << serve_->err();
  const auto start = Clock::now();
  serve_->Signal(SIGTERM);
  // New work is refused while draining.
  EXPECT_TRUE(Eventually([&] {
    auto h = Http()->Get("/health");
    return !h || h->status == 503;
  }));
  for (auto& f : streams) {
    const StreamResult r = f.get();
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.done);
    EXPECT_EQ(r.finish_reason, "length");
  }
  EXPECT_EQ(serve_->Wait(std::chrono::seconds(10)), 0) << serve_->err();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
  EXPECT_NE(serve_->err().find("draining"), std::string::npos);
}

TEST_F(ServeBinary, ShutdownTimeoutCancelsLongRequests) {
  StartServe({"--debug-token-delay-ms", "20", "--shutdown-timeout", "0.3"});
  auto stream = std::async(std::launch::async, [this] {
    return StreamFrom({{"prompt", "long"}, {"max_tokens", 120}, {"ignore_eos", true}});
  });
  ASSERT_TRUE(Eventually([&] {
    auto m = Http()->Get("/metrics");
    return m && m->body.find("anymoe_requests_running 1") != std::string::npos;
  }));
  const auto start = Clock::now();
  serve_->Signal(SIGTERM);
  EXPECT_EQ(serve_->Wait(std::chrono::seconds(10)), 0) << serve_->err();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));
  const StreamResult r = stream.get();
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back()["error"]["code"], "shutting_down");
}

TEST_F(ServeBinary, SecondSignalExitsAtOnce) {
  StartServe({"--debug-token-delay-ms", "50", "--shutdown-timeout", "60"});
  auto stream = std::async(std::launch::async, [this] {
    return StreamFrom({{"prompt", "long"}, {"max_tokens", 120}, {"ignore_eos", true}});
  });
  ASSERT_TRUE(Eventually([&] {
    auto m = Http()->Get("/metrics");
    return m && m->body.find("anymoe_requests_running 1") != std::string::npos;
  }));
  serve_->Signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  serve_->Signal(SIGINT);
  EXPECT_EQ(serve_->Wait(std::chrono::seconds(3)), 1) << serve_->err();
  stream.get();
}

TEST_F(ServeBinary, ConnectionResetMidStreamDoesNotKillTheServer) {
  StartServe({"--debug-token-delay-ms", "5"});
  for (int i = 0; i < 3; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string body = json{
        {"prompt", "reset"},
        {"max_tokens", 100},
        {"ignore_eos", true},
        {"stream", true}}.dump();
    const std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
    char buf[512];
    ASSERT_GT(recv(fd, buf, sizeof(buf), 0), 0);  // the stream has started
    linger reset{1, 0};                           // close with RST, not FIN
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
  }
  EXPECT_TRUE(Eventually([&] {
    auto m = Http()->Get("/metrics");
    return m && m->body.find("anymoe_requests_finished_total{reason=\"cancelled\"} 3") !=
                    std::string::npos;
  })) << serve_->err();
  auto res =
      Http()->Post("/v1/completions", json{{"prompt", "still here"}, {"max_tokens", 2}}.dump(),
                   "application/json");
  ASSERT_TRUE(res) << serve_->err();
  EXPECT_EQ(res->status, 200);
  serve_->Signal(SIGTERM);
  EXPECT_EQ(serve_->Wait(std::chrono::seconds(10)), 0) << serve_->err();
}

TEST_F(ServeBinary, BenchServeReportsAgainstTheServer) {
  StartServe({"--parallel", "4"});
  Process bench({ANYMOE_BINARY,
                 "bench-serve",
                 "--url",
                 "http://127.0.0.1:" + std::to_string(port_),
                 "--num-prompts",
                 "12",
                 "--qps",
                 "200",
                 "--concurrency",
                 "4",
                 "--input-len",
                 "8",
                 "--output-len",
                 "6",
                 "--ignore-eos",
                 "--seed",
                 "1",
                 "--price-per-hour",
                 "2.5",
                 "-o",
                 "json"},
                Path("bench.out"), Path("bench.err"));
  ASSERT_EQ(bench.Wait(std::chrono::seconds(30)), 0) << bench.err() << bench.out();
  const json report = json::parse(bench.out());
  EXPECT_EQ(report["completed"], 12);
  EXPECT_EQ(report["failed"], 0);
  EXPECT_EQ(report["total_output_tokens"], 12 * 6);
  EXPECT_LE(report["max_in_flight"].get<int>(), 4);
  EXPECT_EQ(report["qps"], 200.0);
  EXPECT_GT(report["output_throughput"].get<double>(), 0);
  EXPECT_GT(report["cost_per_million_output_tokens"].get<double>(), 0);
  EXPECT_GT(report["ttft_ms"]["p99"].get<double>(), 0);
  // The table form, and a bad --qps.
  Process table({ANYMOE_BINARY, "bench-serve", "--url", "http://127.0.0.1:" + std::to_string(port_),
                 "--num-prompts", "2", "--input-len", "4", "--output-len", "2"},
                Path("table.out"), Path("table.err"));
  ASSERT_EQ(table.Wait(std::chrono::seconds(30)), 0) << table.err();
  EXPECT_NE(table.out().find("Serving Benchmark Result"), std::string::npos) << table.out();
  Process bad({ANYMOE_BINARY, "bench-serve", "--qps", "-3"}, Path("bad.out"), Path("bad.err"));
  EXPECT_EQ(bad.Wait(std::chrono::seconds(10)), 1);
  EXPECT_NE(bad.err().find("--qps"), std::string::npos) << bad.err();
}

TEST_F(ServeBinary, NonLoopbackBindNeedsAKey) {
  Process p(
      {ANYMOE_BINARY, "serve", "-m", GoldenPath("llama_tiny"), "--host", "0.0.0.0", "--port", "0"},
      Path("out"), Path("err"));
  EXPECT_EQ(p.Wait(std::chrono::seconds(10)), 1);
  EXPECT_NE(p.err().find("--api-key"), std::string::npos) << p.err();
}

// Flag values that could only refuse every request, or never admit one, are
// refused at start with a one-line error naming the flag (issue 20: `--queue
// 0`, `--ctx 0/1`, `--shutdown-timeout nan` were accepted, and `--kv-tokens
// 256 -c 2048` queued a full-context request forever while the scheduler spun).
TEST_F(ServeBinary, ImpossibleFlagsAreRefusedAtStart) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--queue", "0"}, "--queue"},
      {{"-c", "0"}, "--ctx"},
      {{"-c", "1"}, "--ctx"},
      {{"--shutdown-timeout", "nan"}, "--shutdown-timeout"},
      {{"--shutdown-timeout", "inf"}, "--shutdown-timeout"},
      {{"--request-timeout", "nan"}, "--request-timeout"},
      {{"--kv-tokens", "64", "-c", "128"}, "--kv-tokens 64"},
  };
  for (const auto& [flags, needle] : cases) {
    std::vector<std::string> args = {ANYMOE_BINARY, "serve", "-m", GoldenPath("llama_tiny"),
                                     "--port",      "0",     "-t", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    Process p(args, Path("out"), Path("err"));
    const int code = p.Wait(std::chrono::seconds(20));
    SCOPED_TRACE(flags[0] + " " + flags[1]);
    EXPECT_NE(code, 0);
    EXPECT_NE(code, -1) << "still running: " << p.err();
    EXPECT_NE(p.err().find(needle), std::string::npos) << p.err();
    EXPECT_EQ(p.err().find("ready"), std::string::npos) << p.err();
  }
  // `run` refuses a tiny context too, and a tiny temperature is greedy.
  Process run({ANYMOE_BINARY, "run", "-m", GoldenPath("llama_tiny"), "-c", "1", "-p", "hi"},
              Path("out"), Path("err"));
  EXPECT_NE(run.Wait(std::chrono::seconds(20)), 0);
  EXPECT_NE(run.err().find("--ctx"), std::string::npos) << run.err();
}

// Issue 20, defect 1: `anymoe run --temp 1e-39` printed nothing (1/T was inf,
// every probability NaN). A tiny temperature samples the greedy tokens.
TEST_F(ServeBinary, TinyTemperatureRunsGreedily) {
  const auto run = [&](const std::string& temp) {
    Process p({ANYMOE_BINARY, "run", "-m", GoldenPath("llama_tiny"), "-p", "The quick brown fox",
               "-n", "12", "-t", "1", "--temp", temp, "--seed", "3"},
              Path("out"), Path("err"));
    EXPECT_EQ(p.Wait(std::chrono::seconds(30)), 0) << p.err();
    return p.out();
  };
  const std::string greedy = run("0");
  ASSERT_FALSE(greedy.empty());
  EXPECT_EQ(run("1e-39"), greedy);
  EXPECT_EQ(run("1.4e-45"), greedy);
}

// Per-thread malloc arenas kept what each large request needed (issue 20:
// +12-25 MB per HTTP thread, ~+230 MB). serve limits them to two, parses
// large bodies two at a time and trims after them: RSS after many rounds of
// 16 concurrent 1 MiB bodies stays near RSS at start.
TEST_F(ServeBinary, LargeRequestsOnManyThreadsDoNotGrowMemory) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan replaces glibc's malloc (no arenas to limit or trim) and keeps freed
  // blocks in its quarantine (up to 256 MiB), so RSS measures neither here;
  // LeakSanitizer checks the same requests for leaks when serve exits.
  GTEST_SKIP() << "RSS growth is not measurable under AddressSanitizer";
#endif
  StartServe({"--http-threads", "16"});
  // 1 MiB: the most small values a body may hold (130,000 of the 131,072,
  // ServerOptions::json_max_values; a tree of ~20x their bytes) and a string.
  std::string body = "{\"prompt\":\"hi\",\"max_tokens\":1,\"x\":[0";
  for (int i = 1; i < 130000; ++i) body += ",0";
  body += "],\"pad\":\"";
  body += std::string((1 << 20) - 64 - body.size(), 'p') + "\"}";
  const auto rss_kib = [&] {
    std::ifstream status("/proc/" + std::to_string(serve_->pid()) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return 0L;
  };
  const auto round = [&] {
    std::vector<std::future<int>> clients;
    for (int i = 0; i < 16; ++i) {
      clients.push_back(std::async(std::launch::async, [&] {
        auto res = Http()->Post("/v1/completions", body, "application/json");
        return res ? res->status : -1;
      }));
    }
    for (auto& c : clients) EXPECT_EQ(c.get(), 200);
  };
  const long at_ready = rss_kib();
  for (int i = 0; i < 6; ++i) round();
  const long after = rss_kib();
  std::printf("serve RSS: %ld KiB when ready, %ld KiB after six rounds of 16 x 1 MiB\n", at_ready,
              after);
  // main 53f1f7f: +12-25 MB per HTTP thread that parsed a large body.
  EXPECT_LT(after - at_ready, 64 << 10);
  serve_->Signal(SIGTERM);
  EXPECT_EQ(serve_->Wait(std::chrono::seconds(10)), 0) << serve_->err();
}

// The chat page on `anymoe serve` with the tiny GLM-5 (MoE, its own template):
// the model's name, a streamed reply whose text is reasoning (the prompt ends
// inside <think>), tokens/s, the experts the reply used drawn from /routing,
// and a tool call forced by tool_choice=required (constrained decoding).
// ANYMOE_WEB_SCREENSHOT_MOE=FILE.png saves the page (docs/).
TEST_F(ServeBinary, ChatPageStreamsAReplyInHeadlessChromium) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it); "
                    "skipping the web page end-to-end test";
  }
  StartServe({}, Glm5Folder());
  HeadlessChromium browser(chromium, Path("chromium-profile"), Path("chromium.log"));
  const std::string tab = browser.Open("http://127.0.0.1:" + std::to_string(port_) +
                                       "/?q=hello&autosend=1&max_tokens=12&temperature=0");
  ASSERT_FALSE(tab.empty());
  const auto text = [&](const std::string& expression) { return browser.Text(tab, expression); };
  ASSERT_TRUE(
      browser.WaitFor(tab, "document.body.dataset.state === 'done'", std::chrono::seconds(60)))
      << text("document.body.outerHTML");
  EXPECT_NE(
      text("document.getElementById('model-name').textContent").find("anymoe_chat_glm_moe_dsa"),
      std::string::npos);
  EXPECT_FALSE(text("document.getElementById('last-reasoning').textContent").empty());
  EXPECT_EQ(browser.Evaluate(tab, "document.querySelectorAll('.msg.assistant.error').length"), 0);
  EXPECT_TRUE(std::regex_search(
      text("document.querySelector('.stats').textContent"),
      std::regex("^12 tokens · [0-9.]+ tok/s · first token after .*finish: length")))
      << text("document.querySelector('.stats').textContent");
  // 12 tokens + the prompt through 3 MoE layers x 8 experts, top-2.
  const auto used =
      browser.Evaluate(tab, "Number(document.querySelector('figure.routing').dataset.expertsUsed)");
  ASSERT_TRUE(used && used->is_number()) << text("document.body.outerHTML");
  EXPECT_GT(used->get<int>(), 2);
  EXPECT_LE(used->get<int>(), 24);

  // A forced call: the grammar makes the model write one of the example tools.
  ASSERT_TRUE(browser.Evaluate(tab,
                               "document.getElementById('example-tools').click();"
                               "document.getElementById('tool-choice').value = 'required';"
                               "document.getElementById('max-tokens').value = 200;"
                               "submit('Weather in Paris?'); true"));
  ASSERT_TRUE(browser.WaitFor(tab,
                              "document.body.dataset.state === 'done' && "
                              "document.querySelectorAll('.assistant').length === 2",
                              std::chrono::seconds(60)));
  const json calls = json::parse(text("document.getElementById('last-tool-calls').textContent"));
  ASSERT_GE(calls.size(), 1u) << text("document.body.outerHTML");
  const std::string name = calls[0]["function"]["name"];
  EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
  EXPECT_TRUE(json::parse(calls[0]["function"]["arguments"].get<std::string>()).is_object());
  EXPECT_EQ(browser.Evaluate(tab, "document.querySelectorAll('.tool-call').length"),
            int(calls.size()));
  if (const char* png = std::getenv("ANYMOE_WEB_SCREENSHOT_MOE")) {
    std::ofstream(png, std::ios::binary) << browser.Screenshot(tab);
  }
  // The server saw both streamed chat requests (counted once written).
  EXPECT_TRUE(Eventually([&] {
    auto metrics = Http()->Get("/metrics");
    return metrics && metrics->body.find("endpoint=\"/v1/chat/completions\",code=\"200\"} 2") !=
                          std::string::npos;
  }));
}

// --profile-out: SIGHUP writes the expert profile of what was served so far
// (the server keeps serving), and shutdown writes the final one, which holds
// more tokens. The per-layer counts add up to tokens x experts per token.
TEST_F(ServeBinary, ProfileOutWrittenOnSighupAndAtShutdown) {
  const std::string profile = Path("live.json");
  StartServe({"--profile-out", profile}, GoldenPath("moe_gguf/glm4_moe.gguf"));
  const json request = {{"prompt", "Hello"}, {"max_tokens", 8}, {"temperature", 0},
                        {"ignore_eos", true}};
  auto res = Http()->Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  ASSERT_FALSE(std::filesystem::exists(profile));
  serve_->Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(profile); }, std::chrono::seconds(10)))
      << serve_->err();
  const json first = json::parse(ReadFile(profile));
  const int64_t k = first["experts_per_token"];
  ASSERT_GT(first["tokens"].get<int64_t>(), 0);
  for (const json& layer : first["layers"]) {
    int64_t routed = 0;
    for (int64_t c : layer["tokens_routed"]) routed += c;
    EXPECT_EQ(routed, first["tokens"].get<int64_t>() * k);
  }
  // Still serving after SIGHUP.
  res = Http()->Post("/v1/completions", request.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  serve_->Signal(SIGTERM);
  ASSERT_EQ(serve_->Wait(std::chrono::seconds(20)), 0) << serve_->err();
  const json last = json::parse(ReadFile(profile));
  EXPECT_GT(last["tokens"].get<int64_t>(), first["tokens"].get<int64_t>());
  EXPECT_EQ(last["model"]["fingerprint"], first["model"]["fingerprint"]);
  EXPECT_EQ(last["source"], "serve");
}

}  // namespace
}  // namespace anymoe::testing
