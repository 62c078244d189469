// `anymoe bench` as a user runs it: llama-bench-compatible JSON (one object
// per test, positive t/s), the markdown table, the roofline with --membw, and
// one-line errors for bad arguments.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/backend.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

class BenchCli : public testing::TempDirTest {
 protected:
  RunResult Bench(const std::vector<std::string>& args) {
    std::string cmd = std::string(ANYMOE_BINARY) + " bench";
    for (const auto& a : args) cmd += " '" + a + "'";
    const std::string out = Path("stdout"), err = Path("stderr");
    cmd += " >" + out + " 2>" + err + " </dev/null";
    RunResult r;
    const int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = Read(out);
    r.err = Read(err);
    return r;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string Golden(const std::string& rel) {
    return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel;
  }
};

TEST_F(BenchCli, JsonHasOneObjectPerTest) {
  const auto r =
      Bench({"-m", Golden("llama_tiny"), "-p", "8", "-n", "4", "-r", "2", "-o", "json", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2u) << r.out;
  EXPECT_EQ(json[0]["n_prompt"], 8);
  EXPECT_EQ(json[0]["n_gen"], 0);
  EXPECT_EQ(json[1]["n_prompt"], 0);
  EXPECT_EQ(json[1]["n_gen"], 4);
  for (const auto& o : json) {
    EXPECT_GT(o["avg_ts"].get<double>(), 0.0);
    EXPECT_EQ(o["samples_ns"].size(), 2u);
    EXPECT_EQ(o["samples_ts"].size(), 2u);
    EXPECT_EQ(o["n_threads"], 1);
    EXPECT_EQ(o["backend"], "cpu");
    EXPECT_EQ(o["gpu_info"], "");
    EXPECT_EQ(o["n_gpu_layers"], 0);
    EXPECT_EQ(o["model_filename"], Golden("llama_tiny"));
    EXPECT_GT(o["model_size"].get<int64_t>(), 0);
    EXPECT_GT(o["model_n_params"].get<int64_t>(), 0);
  }
}

TEST_F(BenchCli, CommaListsMultiplyTests) {
  const auto r = Bench(
      {"-m", Golden("llama_tiny"), "-p", "4,8", "-n", "0", "-r", "1", "-o", "json", "-t", "1,2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 4u) << r.out;
  EXPECT_EQ(json[0]["n_threads"], 1);
  EXPECT_EQ(json[1]["n_prompt"], 8);
  EXPECT_EQ(json[3]["n_threads"], 2);
}

// --parallel s decodes s sequences per step: s x n tokens per run, one test per s.
TEST_F(BenchCli, ParallelDecodesSeveralSequencesPerStep) {
  const auto r = Bench({"-m", Golden("llama_tiny"), "-p", "0", "-n", "4", "--parallel", "1,3",
                        "-r", "2", "-o", "json", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 2u) << r.out;
  EXPECT_EQ(json[0]["n_parallel"], 1);
  EXPECT_EQ(json[1]["n_parallel"], 3);
  for (const auto& o : json) {
    ASSERT_EQ(o["samples_ns"].size(), 2u);
    const double tokens = 4.0 * o["n_parallel"].get<double>();
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_NEAR(o["samples_ts"][i].get<double>(),
                  tokens * 1e9 / o["samples_ns"][i].get<double>(), 1e-6 * tokens * 1e9);
    }
  }
  const auto md = Bench({"-m", Golden("llama_tiny"), "-p", "0", "-n", "4", "--parallel", "3",
                         "-r", "1", "-t", "1"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("tg4x3 |"), std::string::npos) << md.out;
}

// --op-profile: per test, every op's calls and milliseconds per timed run, in
// the JSON and as a table after the main one; the ops fit in the run's time.
TEST_F(BenchCli, OpProfileTimesEveryOpOfTheTimedRuns) {
  const auto r = Bench({"-m", Golden("llama_tiny"), "-p", "8", "-n", "4", "-r", "2", "-o", "json",
                        "-t", "1", "--op-profile"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 2u) << r.out;
  for (const auto& o : json) {
    ASSERT_TRUE(o.contains("op_profile")) << o;
    double ms = 0, matmul_calls = 0, embedding_calls = 0;
    for (const auto& e : o["op_profile"]) {
      EXPECT_GT(e["calls"].get<double>(), 0.0) << e;
      ms += e["ms"].get<double>();
      // Matmul alone, or fused with the norm before it or an epilogue after it.
      if (e["op"].get<std::string>().find("Matmul") != std::string::npos) {
        matmul_calls += e["calls"].get<double>();
      }
      EXPECT_EQ(e["launches"], 0.0) << e;  // the CPU launches nothing
      if (e["op"] == "Embedding") embedding_calls += e["calls"].get<double>();
    }
    EXPECT_GT(matmul_calls, 0.0);
    // One embedding per forward step: the pp8 run's one step, the tg4 run's four.
    EXPECT_EQ(embedding_calls, o["n_prompt"] == 8 ? 1.0 : 4.0) << o;
    EXPECT_GT(ms, 0.0);
    EXPECT_LE(ms, 1.05 * o["avg_ns"].get<double>() / 1e6) << o;
  }
  const auto plain =
      Bench({"-m", Golden("llama_tiny"), "-p", "8", "-n", "0", "-r", "1", "-o", "json", "-t", "1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(nlohmann::json::parse(plain.out)[0].contains("op_profile"));
  const auto md = Bench(
      {"-m", Golden("llama_tiny"), "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--op-profile"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("ops of llama"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| RmsNorm+Matmul+SwiGlu "), std::string::npos) << md.out;
}

// On a device, --op-profile counts launches: a decode step of llama_tiny is
// the same number of them whatever the number of sequences it decodes (5 per
// layer of its 2, and the embedding, the logit rows' gather, the final norm
// and head), and the table gives them per step.
TEST_F(BenchCli, OpProfileCountsDeviceLaunchesPerDecodeStep) {
  if (!CreateBackend("opencl", BackendOptions{.num_threads = 1}).ok()) {
    GTEST_SKIP() << "opencl unavailable";
  }
  const auto r = Bench({"-m", Golden("llama_tiny"), "--backend", "opencl", "-p", "0", "-n", "4",
                        "--parallel", "1,3", "-r", "1", "-o", "json", "-t", "1", "--op-profile"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 2u) << r.out;
  for (const auto& o : json) {
    double launches = 0;
    for (const auto& e : o["op_profile"]) launches += e["launches"].get<double>();
    EXPECT_EQ(launches, 4 * 13.0) << o;  // 4 steps
  }
  const auto md = Bench({"-m", Golden("llama_tiny"), "--backend", "opencl", "-p", "0", "-n", "4",
                         "--parallel", "3", "-r", "1", "-t", "1", "--op-profile"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("per decode step: 13.0 launches"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| Rope+ScatterRows+Attention "), std::string::npos) << md.out;
}

// A device backend reserves its memory once, at load, for what the tests
// will hold: one cache per sequence decoded together, each as long as the
// longest test. pp512 after pp128 and tg64x8 both ran out of it on an H200.
class BenchOnDevice : public BenchCli, public ::testing::WithParamInterface<std::string> {};

TEST_P(BenchOnDevice, EveryTestFitsTheMemoryReservedAtLoad) {
  if (!CreateBackend(GetParam(), BackendOptions{.num_threads = 1}).ok())
    GTEST_SKIP() << GetParam() << " unavailable";
  const auto r = Bench({"-m", Golden("llama_tiny"), "--backend", GetParam(), "-p", "16,64", "-n",
                        "8", "--parallel", "1,4", "-d", "0,8", "-r", "1", "-o", "json", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 8u) << r.out;  // pp16, pp64, tg8, tg8x4 at depths 0 and 8
  for (const auto& o : json) {
    EXPECT_EQ(o["backend"], GetParam());
    EXPECT_GT(o["avg_ts"].get<double>(), 0.0);
    EXPECT_NE(o["gpu_info"], "");          // the device's name, as llama-bench gives it
    EXPECT_EQ(o["n_gpu_layers"], 2) << o;  // llama_tiny's layers, all on the device
    EXPECT_EQ(o["n_cpu_moe"], 0) << o;
  }
}

// --cpu-moe / --n-cpu-moe N: the JSON says how many layers' routed experts ran
// on the CPU (llama-bench's n_cpu_moe), capped at the model's layers (3 here).
TEST_P(BenchOnDevice, ReportsTheLayersWhoseExpertsRunOnTheCpu) {
  if (!CreateBackend(GetParam(), BackendOptions{.num_threads = 1}).ok())
    GTEST_SKIP() << GetParam() << " unavailable";
  for (const auto& [flags, layers] :
       std::vector<std::pair<std::vector<std::string>, int>>{{{"--cpu-moe"}, 3},
                                                             {{"--n-cpu-moe", "2"}, 2}}) {
    std::vector<std::string> args = {"-m", Golden("moe/glm4_moe"), "--backend", GetParam(), "-p",
                                     "0", "-n", "4", "-r", "1", "-o", "json", "-t", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = Bench(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto json = nlohmann::json::parse(r.out);
    ASSERT_EQ(json.size(), 1u) << r.out;
    EXPECT_EQ(json[0]["n_cpu_moe"], layers) << json[0];
    EXPECT_GT(json[0]["avg_ts"].get<double>(), 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BenchOnDevice, ::testing::Values("opencl", "cuda"),
                         [](const auto& info) { return info.param; });

// -d fills every cache with that many tokens before each test (untimed), one
// set of tests per depth, named and reported as llama-bench does.
TEST_F(BenchCli, DepthPrefillsTheCacheBeforeEachTest) {
  const auto r = Bench({"-m", Golden("llama_tiny"), "-p", "4", "-n", "3", "-d", "0,12",
                        "--parallel", "1,2", "-r", "1", "-o", "json", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json.size(), 6u) << r.out;
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(json[i]["n_depth"], i < 3 ? 0 : 12) << i;
  const auto md = Bench({"-m", Golden("llama_tiny"), "-p", "4", "-n", "3", "-d", "12", "-r", "1",
                         "-t", "1"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("pp4 @ d12 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("tg3 @ d12 |"), std::string::npos) << md.out;
  const auto bad = Bench({"-m", Golden("llama_tiny"), "-d", "-1", "-t", "1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("-d: depths must be >= 0"), std::string::npos) << bad.err;
}

TEST_F(BenchCli, MarkdownTableLikeLlamaBench) {
  const auto r = Bench({"-m", Golden("llama_tiny"), "-p", "8", "-n", "4", "-r", "2", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("| model ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("| backend    | threads |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tg4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" ± "), std::string::npos) << r.out;
}

TEST_F(BenchCli, MembwAddsTheRoofline) {
  const auto md = Bench({"-m", Golden("moe_gguf/glm4_moe.gguf"), "-p", "0", "-n", "4", "-r", "1",
                         "-t", "1", "--membw", "--membw-mib", "32", "--membw-passes", "2"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("memory bandwidth (read, 1 thread,"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("routed experts"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("x 2/8"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("% of bound"), std::string::npos) << md.out;

  const auto js =
      Bench({"-m", Golden("moe_gguf/glm4_moe.gguf"), "-p", "0", "-n", "4", "-r", "1", "-t", "1",
             "-o", "json", "--membw", "--membw-mib", "32", "--membw-passes", "2"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const auto json = nlohmann::json::parse(js.out);
  ASSERT_EQ(json.size(), 1u);
  EXPECT_GT(json[0]["membw_gbs"].get<double>(), 0.0);
  EXPECT_GT(json[0]["decode_bytes_per_token"].get<double>(), 0.0);
  EXPECT_GT(json[0]["roofline_ts"].get<double>(), 0.0);
  EXPECT_GT(json[0]["roofline_pct"].get<double>(), 0.0);
}

TEST_F(BenchCli, BadArgumentsAreOneLineErrors) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-m", Golden("llama_tiny"), "-p", "0", "-n", "0"},
           {"-m", Golden("llama_tiny"), "-t", "0"},
           {"-m", Golden("llama_tiny"), "--parallel", "0"},
           {"-m", Golden("llama_tiny"), "--parallel", "9", "--batch", "8"},
           {"-m", Golden("llama_tiny"), "-p", "1000", "-n", "0"},  // context is 128
           {"-m", Golden("no_such_model")}}) {
    const auto r = Bench(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace anymoe
