// bench-serve's load generator: SSE parsing across arbitrary splits, the seeded
// workload (prompts, Poisson arrivals), percentiles, and whole runs against a
// scripted HTTP server started here (concurrency cap, token counting with and
// without usage, errors, cost) and against anymoe's own server.
#include "loadgen/load_generator.h"

#include <httplib.h>

#include <atomic>
#include <cmath>

#include "loadgen/latency_summary.h"
#include "loadgen/sse_reader.h"
#include "loadgen/workload.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;

TEST(SseReader, EventsSurviveAnySplit) {
  const std::string stream =
      ": ping\n\ndata: {\"a\":1}\n\nevent: x\ndata: two\ndata: lines\n\r\ndata: crlf\r\n\r\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"a\":1}", "two\nlines", "crlf", "[DONE]"};
  for (size_t step = 1; step <= stream.size(); ++step) {
    SseReader reader;
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); i += step) {
      reader.Feed(std::string_view(stream).substr(i, step),
                  [&](std::string_view d) { got.emplace_back(d); });
    }
    EXPECT_EQ(got, expected) << "step " << step;
    EXPECT_EQ(reader.pending(), 0u);
  }
}

TEST(Workload, SeededPromptsAndPoissonArrivals) {
  const auto a = RandomPrompts(5, 32, 7), b = RandomPrompts(5, 32, 7), c = RandomPrompts(5, 32, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const std::string& p : a) EXPECT_EQ(std::count(p.begin(), p.end(), ' '), 31);

  const auto t = PoissonArrivals(20000, 50.0, 1);
  EXPECT_EQ(t, PoissonArrivals(20000, 50.0, 1));
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
  EXPECT_NEAR(t.back() / 20000, 1.0 / 50.0, 0.02 / 50.0 * 5);  // mean gap 1/rate
  // Exponential gaps: about e^-1 of them exceed the mean.
  int longer = 0;
  for (size_t i = 1; i < t.size(); ++i) longer += (t[i] - t[i - 1]) > 1.0 / 50.0;
  EXPECT_NEAR(double(longer) / double(t.size()), std::exp(-1.0), 0.02);
  for (double x : PoissonArrivals(10, 0, 1)) EXPECT_EQ(x, 0.0);
  for (double x : PoissonArrivals(10, INFINITY, 1)) EXPECT_EQ(x, 0.0);
}

TEST(LatencySummary, PercentilesInterpolateLikeNumpy) {
  const LatencySummary s = Summarize({4, 1, 3, 2, 5, 6, 7, 8, 9, 10});
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.p90, 9.1);
  EXPECT_DOUBLE_EQ(s.p99, 9.91);
  EXPECT_DOUBLE_EQ(s.max, 10);
  EXPECT_EQ(Summarize({}).count, 0u);
  EXPECT_DOUBLE_EQ(Summarize({3}).p99, 3);
}

// A scripted OpenAI-style server: streams `tokens` chunks `gap` apart, with or
// without usage; every `fail_every`-th request gets a 503.
class FakeServer {
 public:
  struct Script {
    int tokens_cap = 1000;  // chunks never exceed max_tokens nor this
    std::chrono::milliseconds gap{2};
    bool usage = true;
    int fail_every = 0;
  };
  explicit FakeServer(Script script) : script_(script) {
    server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      const int n = ++requests_;
      const json body = json::parse(req.body);
      bodies_mu_.lock();
      bodies_.push_back(body);
      bodies_mu_.unlock();
      if (script_.fail_every > 0 && n % script_.fail_every == 0) {
        res.status = 503;
        res.set_content(R"({"error":{"message":"queue full","type":"unavailable_error"}})",
                        "application/json");
        return;
      }
      const int now = ++in_flight_;
      int seen = max_in_flight_.load();
      while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
      }
      const int tokens = std::min(body["max_tokens"].get<int>(), script_.tokens_cap);
      res.set_chunked_content_provider(
          "text/event-stream", [this, tokens, i = 0](size_t, httplib::DataSink& sink) mutable {
            std::this_thread::sleep_for(script_.gap);
            std::string out;
            if (i < tokens) {
              out =
                  "data: " +
                  json{{"choices", {{{"index", 0}, {"text", "tok "}, {"finish_reason", nullptr}}}}}
                      .dump() +
                  "\n\n";
              ++i;
            } else {
              out = "data: " +
                    json{{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}}
                        .dump() +
                    "\n\n";
              if (script_.usage) {
                out += "data: " +
                       json{{"choices", json::array()},
                            {"usage", {{"prompt_tokens", 11}, {"completion_tokens", tokens}}}}
                           .dump() +
                       "\n\n";
              }
              out += "data: [DONE]\n\n";
            }
            sink.write(out.data(), out.size());
            if (i >= tokens && out.find("[DONE]") != std::string::npos) {
              --in_flight_;
              sink.done();
            }
            return true;
          });
    });
    server_.set_tcp_nodelay(true);  // each chunk leaves at once, as from a real server
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int max_in_flight() const { return max_in_flight_.load(); }
  int requests() const { return requests_.load(); }
  std::vector<json> bodies() {
    std::lock_guard<std::mutex> lock(bodies_mu_);
    return bodies_;
  }

 private:
  Script script_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> requests_{0}, in_flight_{0}, max_in_flight_{0};
  std::mutex bodies_mu_;
  std::vector<json> bodies_;
};

TEST(LoadGenerator, RespectsConcurrencyAndCountsTokens) {
  FakeServer fake({});
  BenchServeOptions o;
  o.url = fake.url();
  o.num_prompts = 24;
  o.concurrency = 3;
  o.input_len = 16;
  o.output_len = 5;
  o.ignore_eos = true;
  o.model = "m";
  o.api_key = "k";
  auto report = RunLoad(o);
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_EQ(report->completed, 24);
  EXPECT_EQ(report->failed, 0);
  EXPECT_EQ(report->output_tokens, 24 * 5);
  EXPECT_EQ(report->input_tokens, 24 * 11);  // from usage
  EXPECT_FALSE(report->input_tokens_estimated);
  EXPECT_LE(fake.max_in_flight(), 3);
  EXPECT_LE(report->max_in_flight, 3);
  EXPECT_EQ(report->ttft.count, 24u);
  EXPECT_EQ(report->itl.count, 24u * 4);
  EXPECT_GE(report->ttft.median, 0.002);  // one gap before the first chunk
  EXPECT_GE(report->tpot.median, 0.0015);
  EXPECT_LE(report->ttft.median, report->e2e.median);
  const json first = fake.bodies().front();
  EXPECT_EQ(first["max_tokens"], 5);
  EXPECT_EQ(first["stream"], true);
  EXPECT_EQ(first["ignore_eos"], true);
  EXPECT_EQ(first["model"], "m");
  EXPECT_EQ(first["stream_options"]["include_usage"], true);
  const std::string prompt = first["prompt"];
  EXPECT_EQ(std::count(prompt.begin(), prompt.end(), ' '), 15);
}

TEST(LoadGenerator, WithoutUsageCountsChunksAndEstimatesInput) {
  FakeServer::Script script;
  script.usage = false;
  FakeServer fake(script);
  BenchServeOptions o;
  o.url = fake.url() + "/v1/";  // a /v1 suffix is accepted
  o.num_prompts = 6;
  o.concurrency = 6;
  o.input_len = 20;
  o.output_len = 4;
  auto report = RunLoad(o);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->completed, 6);
  EXPECT_EQ(report->output_tokens, 6 * 4);
  EXPECT_EQ(report->input_tokens, 6 * 20);
  EXPECT_TRUE(report->input_tokens_estimated);
  EXPECT_EQ(fake.bodies().front().count("ignore_eos"), 0u);
}

TEST(LoadGenerator, CountsErrorsAndPricesOutput) {
  FakeServer::Script script;
  script.fail_every = 4;
  FakeServer fake(script);
  BenchServeOptions o;
  o.url = fake.url();
  o.num_prompts = 12;
  o.concurrency = 2;
  o.output_len = 3;
  o.price_per_hour = 3.6;
  auto report = RunLoad(o);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->failed, 3);
  EXPECT_EQ(report->completed, 9);
  ASSERT_FALSE(report->errors.empty());
  EXPECT_NE(report->errors[0].find("HTTP 503: queue full"), std::string::npos) << report->errors[0];
  // $3.6/h = $0.001/s; at T tok/s a million tokens cost 1e6 / T * 0.001.
  EXPECT_NEAR(report->cost_per_million_output(), 1000.0 / report->output_throughput(), 1e-6);
  const json j = ReportJson(*report);
  EXPECT_EQ(j["failed"], 3);
  EXPECT_EQ(j["qps"], "inf");
  for (const char* key : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}) {
    for (const char* stat : {"mean", "median", "p90", "p99"}) {
      EXPECT_TRUE(j[key][stat].is_number()) << key << "." << stat;
    }
  }
  EXPECT_TRUE(j["cost_per_million_output_tokens"].is_number());
  EXPECT_TRUE(j["request_throughput"].is_number());
  EXPECT_TRUE(j["output_throughput"].is_number());
  const std::string table = ReportTable(*report);
  for (const char* row : {"Successful requests:", "Failed requests:", "Mean TTFT (ms):",
                          "P99 TPOT (ms):", "Median ITL (ms):", "P90 E2E (ms):",
                          "Cost per million output tokens ($):", "Output token throughput"}) {
    EXPECT_NE(table.find(row), std::string::npos) << row << "\n" << table;
  }
}

TEST(LoadGenerator, PoissonArrivalsSpreadTheRequests) {
  FakeServer fake({});
  BenchServeOptions o;
  o.url = fake.url();
  o.num_prompts = 10;
  o.concurrency = 10;
  o.output_len = 1;
  o.qps = 40;
  o.seed = 3;
  auto report = RunLoad(o);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->completed, 10);
  const double last_arrival = PoissonArrivals(10, 40, 3).back();
  EXPECT_GE(report->duration, last_arrival);
}

TEST(LoadGenerator, BadUrlsAndConnectionFailures) {
  BenchServeOptions o;
  o.url = "127.0.0.1:8080";
  EXPECT_FALSE(RunLoad(o).ok());
  o.url = "ftp://127.0.0.1:8080";
  EXPECT_FALSE(RunLoad(o).ok());
  // Nothing listens on port 1: every request fails, none hangs.
  o.url = "http://127.0.0.1:1";
  o.num_prompts = 3;
  auto report = RunLoad(o);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->failed, 3);
  EXPECT_NE(report->errors[0].find("request failed"), std::string::npos);
}

class LoadGeneratorOnAnymoe : public ServerTest {};

TEST_F(LoadGeneratorOnAnymoe, ExactTokenCountsWithIgnoreEos) {
  SchedulerOptions sched;
  sched.max_parallel = 4;
  StartServer({}, sched);
  BenchServeOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server_->port());
  o.num_prompts = 16;
  o.concurrency = 4;
  o.input_len = 8;
  o.output_len = 12;
  o.ignore_eos = true;
  auto report = RunLoad(o);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->failed, 0) << (report->errors.empty() ? "" : report->errors[0]);
  EXPECT_EQ(report->output_tokens, 16 * 12);
  EXPECT_FALSE(report->input_tokens_estimated);
  EXPECT_GT(report->output_throughput(), 0);
}

}  // namespace
}  // namespace anymoe::testing
