// `mpirun -np 2 anymoe serve --ep`: rank 0 serves HTTP and schedules, rank 1
// runs each step with its own experts. Concurrent requests (continuous
// batching, a shared prompt prefix, logprobs) get the same tokens and
// log-probabilities as from one process; SIGTERM to rank 0 ends every rank
// with exit 0; a rank that hangs gives the clients 503 errors and ends the
// job; a rank killed mid-stream ends the job and closes the streams, all
// within 30 s.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <regex>
#include <sstream>

#include "child_process.h"
#include "server_fixture.h"

namespace anymoe::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The process of `rank` among the children of mpirun `launcher`, or -1.
pid_t RankPid(pid_t launcher, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* d = readdir(proc)) {
    const pid_t pid = std::atoi(d->d_name);
    if (pid <= 0) continue;
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = stat.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid != launcher) continue;
    const std::string env = ReadFile("/proc/" + std::to_string(pid) + "/environ");
    if (env.find(std::string("\0", 1) + want + std::string("\0", 1)) != std::string::npos ||
        env.rfind(want + std::string("\0", 1), 0) == 0) {
      found = pid;
      break;
    }
  }
  closedir(proc);
  return found;
}

class ExpertParallelServe : public ServerTest {
 protected:
  void SetUp() override {
#ifndef ANYMOE_MPIRUN
    GTEST_SKIP() << "built without MPI (ANYMOE_MPI=OFF): expert parallelism is not available";
#endif
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    dir_ = std::filesystem::temp_directory_path() /
           ("anymoe_ep_serve_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    servers_.clear();
    std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // `anymoe serve` of `model`: under mpirun with `ranks` (0: one plain
  // process); returns its port once it is ready.
  int Start(int ranks, const std::string& model, std::vector<std::string> extra = {},
            const std::string& fault = "") {
    std::vector<std::string> args;
#ifdef ANYMOE_MPIRUN
    if (ranks > 0) {
      args = {ANYMOE_MPIRUN, "-np", std::to_string(ranks), "--oversubscribe", "--bind-to", "none"};
      if (!fault.empty()) args.insert(args.end(), {"-x", "ANYMOE_EP_FAULT=" + fault});
    }
#endif
    args.insert(args.end(), {ANYMOE_BINARY, "serve", "-m", model, "--port", "0", "-t", "1",
                             "--parallel", "3"});
    if (ranks > 0) args.push_back("--ep");
    args.insert(args.end(), extra.begin(), extra.end());
    const std::string name = "serve" + std::to_string(started_++);  // never a stale file
    servers_.push_back(std::make_unique<Process>(args, Path(name + ".out"), Path(name + ".err")));
    Process& p = *servers_.back();
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    int port = 0;
    EXPECT_TRUE(Eventually(
        [&] {
          std::smatch m;
          const std::string err = p.err();
          if (!std::regex_search(err, m, listening)) return false;
          port = std::stoi(m[1]);
          return err.find("anymoe: ready") != std::string::npos;
        },
        std::chrono::seconds(30)))
        << p.err();
    return port;
  }

  static httplib::Result Post(int port, const json& body) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(40);
    return client.Post("/v1/completions", body.dump(), "application/json");
  }

  // A stream of 100 tokens; its error event's code, if one came.
  static std::pair<StreamResult, std::string> Stream(int port, const std::string& prompt) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(40);
    StreamResult r = StreamRequest(client, "/v1/completions",
                                   {{"prompt", prompt}, {"max_tokens", 100}, {"temperature", 0},
                                    {"ignore_eos", true}});
    std::string error;
    for (const json& e : r.events) {
      if (e.contains("error")) error = e["error"].value("code", "?");
    }
    return {std::move(r), error};
  }

  // Three streams while rank 1 meets `fault` (ANYMOE_EP_FAULT) at its 60th
  // exchange, mid-generation; the job must end within 30 s, non-zero.
  std::vector<std::pair<StreamResult, std::string>> StreamsUnderFault(const std::string& fault,
                                                                      const std::string& timeout) {
    const int port = Start(2, GoldenPath("moe/qwen3_moe"),
                           {"--ep-timeout", timeout, "--debug-token-delay-ms", "10"}, fault);
    const auto start = Clock::now();
    std::vector<std::future<std::pair<StreamResult, std::string>>> streams;
    for (int i = 0; i < 3; ++i) {
      streams.push_back(std::async(std::launch::async,
                                   [port, i] { return Stream(port, "Hello " + std::to_string(i)); }));
    }
    std::vector<std::pair<StreamResult, std::string>> out;
    for (auto& f : streams) out.push_back(f.get());
    Process& job = *servers_.back();
    const int code = job.Wait(std::chrono::seconds(30));
    EXPECT_NE(code, 0);
    EXPECT_NE(code, -1) << "the job did not end within 30 s";
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
    return out;
  }

  // Six requests at once over 3 slots: different prompt lengths, two that
  // share a prefix (the prefix cache), greedy with log-probabilities, and one
  // sampled with a seed. Returns each reply's first choice.
  static std::vector<json> Workload(int port) {
    const std::string shared = "The quick brown fox jumps over the lazy dog and keeps running ";
    const std::vector<json> requests = {
        {{"prompt", "Hello"}, {"max_tokens", 12}},
        {{"prompt", shared + "far"}, {"max_tokens", 9}},
        {{"prompt", "One two three four five six seven"}, {"max_tokens", 16}},
        {{"prompt", shared + "away"}, {"max_tokens", 7}},
        {{"prompt", "a"}, {"max_tokens", 20}},
        {{"prompt", "Sampled text"}, {"max_tokens", 10}, {"temperature", 0.9}, {"seed", 7}},
    };
    std::vector<std::future<httplib::Result>> replies;
    for (json r : requests) {
      r["ignore_eos"] = true;
      r["logprobs"] = 2;
      if (!r.contains("temperature")) r["temperature"] = 0;
      replies.push_back(std::async(std::launch::async, [port, r] { return Post(port, r); }));
    }
    std::vector<json> choices;
    for (auto& f : replies) {
      const httplib::Result r = f.get();
      const bool ok = r && r->status == 200;
      EXPECT_TRUE(ok) << (r ? r->body : "no response");
      choices.push_back(ok ? json::parse(r->body)["choices"][0] : json());
    }
    return choices;
  }

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<Process>> servers_;
  int started_ = 0;
};

TEST_F(ExpertParallelServe, ConcurrentRequestsMatchOneProcessAndSigtermEndsEveryRank) {
  // GQA (Qwen3-MoE) and MLA + DSA (GLM-5) caches.
  for (const char* name : {"moe/qwen3_moe", "moe/glm_moe_dsa"}) {
    SCOPED_TRACE(name);
    const std::string model = GoldenPath(name);
    const int one_port = Start(0, model);
    const std::vector<json> one = Workload(one_port);
    const int ep_port = Start(2, model);
    const std::vector<json> ep = Workload(ep_port);
    ASSERT_EQ(one.size(), ep.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_FALSE(one[i].is_null());
      EXPECT_FALSE(one[i]["text"].get<std::string>().empty());
      // Text, tokens and log-probabilities (printed with every digit).
      EXPECT_EQ(one[i].dump(), ep[i].dump()) << "request " << i;
    }
    // Again, now that the prefix cache holds the shared prompt's blocks: rank
    // 1 reads the blocks rank 0's scheduler adopted, with the same contents.
    EXPECT_EQ(Workload(ep_port)[3].dump(), one[3].dump());
    auto metrics = httplib::Client("127.0.0.1", ep_port).Get("/metrics");
    ASSERT_TRUE(metrics);
    const std::smatch hits = [&] {
      std::smatch m;
      std::regex_search(metrics->body, m, std::regex("\nanymoe_prefix_cache_hits_total ([0-9]+)"));
      return m;
    }();
    ASSERT_FALSE(hits.empty()) << metrics->body;
    EXPECT_GT(std::stoi(hits[1]), 0);

    // SIGTERM to rank 0 alone: it drains, tells rank 1, and every rank exits 0.
    Process& job = *servers_.back();
    const pid_t rank0 = RankPid(job.pid(), 0);
    ASSERT_GT(rank0, 0);
    ASSERT_GT(RankPid(job.pid(), 1), 0);
    kill(rank0, SIGTERM);
    EXPECT_EQ(job.Wait(std::chrono::seconds(20)), 0) << job.err();
    EXPECT_NE(job.err().find("anymoe: stopped"), std::string::npos) << job.err();
    servers_.clear();
  }
}

TEST_F(ExpertParallelServe, SigtermToRankZeroDrainsAndEndsEveryRankCleanly) {
  // The graceful path: rank 0 drains its running stream, then tells rank 1
  // (which ignores signals once loaded) to stop; every rank exits 0.
  const int port = Start(2, GoldenPath("moe/qwen3_moe"), {"--debug-token-delay-ms", "20"});
  Process& job = *servers_.back();
  const pid_t rank0 = RankPid(job.pid(), 0);
  ASSERT_GT(rank0, 0) << "rank 0 not found among mpirun's children";
  auto stream = std::async(std::launch::async, [port] { return Stream(port, "Hello"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(rank0, SIGTERM);
  const auto [r, error] = stream.get();
  EXPECT_TRUE(r.done);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(job.Wait(std::chrono::seconds(20)), 0) << job.err();
  EXPECT_NE(job.err().find("anymoe: stopped"), std::string::npos) << job.err();
  EXPECT_EQ(job.err().find("MPI_ABORT"), std::string::npos) << job.err();
}

TEST_F(ExpertParallelServe, SigtermToMpirunEndsEveryRank) {
  // mpirun (Open MPI 4.1) passes a SIGTERM on late and SIGKILLs the ranks
  // odls_base_sigkill_timeout later (docs/distributed.md): a drain is not
  // guaranteed, but the job ends, nothing hangs, and the stream either
  // completed or was closed.
  const int port = Start(2, GoldenPath("moe/qwen3_moe"), {"--debug-token-delay-ms", "20"});
  auto stream = std::async(std::launch::async, [port] { return Stream(port, "Hello"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  servers_.back()->Signal(SIGTERM);
  const auto [r, error] = stream.get();
  (void)r;
  (void)error;
  Process& job = *servers_.back();
  EXPECT_NE(job.Wait(std::chrono::seconds(30)), -1) << job.err();
  EXPECT_EQ(job.err().find("MPI_ABORT"), std::string::npos) << job.err();
}

TEST_F(ExpertParallelServe, HungRankGivesServiceUnavailableAndEndsTheJob) {
  // Rank 1 SIGSTOPs itself: rank 0 gives up after --ep-timeout, fails the
  // running requests with 503 errors (expert_parallel_failure), and MPI_Abort
  // ends the job.
  for (const auto& [r, error] : StreamsUnderFault("stop:1:60", "2")) {
    EXPECT_EQ(r.status, 200);  // the stream had begun
    EXPECT_EQ(error, "expert_parallel_failure");
    EXPECT_NE(r.body.find("unavailable_error"), std::string::npos) << r.body;
  }
  const std::string err = servers_.back()->err();
  EXPECT_NE(err.find("timed out after 2 s"), std::string::npos) << err;
  EXPECT_NE(err.find("stopping every rank"), std::string::npos) << err;
}

TEST_F(ExpertParallelServe, KilledRankEndsTheJobAndClosesTheStreams) {
  // Rank 1 SIGKILLs itself: mpirun ends rank 0 at once; the streams end
  // without their [DONE] or with an error (nothing hangs).
  for (const auto& [r, error] : StreamsUnderFault("kill:1:60", "5")) {
    EXPECT_TRUE(!r.done || !error.empty()) << "a stream completed although rank 1 died";
  }
  const std::string err = servers_.back()->err();
  EXPECT_NE(err.find("exited on signal 9"), std::string::npos) << err;
}

}  // namespace
}  // namespace anymoe::testing
