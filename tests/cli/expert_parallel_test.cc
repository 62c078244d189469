// `mpirun -np N anymoe run --ep` on the tiny MoE goldens: the greedy tokens and
// every step's logits are byte-identical to one process, for 2 and 3 ranks,
// contiguous and scattered placements, HF and GGUF files; a rank that is
// killed or stopped mid-run makes the job end non-zero with a clear message
// within a bound; a bad placement file is refused on every rank. The same on
// the OpenCL backend, whose output rows travel through host memory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "backends/backend.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Golden(const std::string& name) { return std::string(ANYMOE_GOLDEN_DIR) + "/" + name; }

class ExpertParallel : public testing::TempDirTest {
 protected:
  void SetUp() override {
#ifndef ANYMOE_MPIRUN
    GTEST_SKIP() << "built without MPI (ANYMOE_MPI=OFF): expert parallelism is not available";
#else
    testing::TempDirTest::SetUp();
    // CI runs as root; OpenMPI refuses that unless told twice.
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
#endif
  }

  RunResult Shell(const std::string& cmd) {
    const std::string out = Path("stdout"), err = Path("stderr");
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system((cmd + " >" + out + " 2>" + err + " </dev/null").c_str());
    RunResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // `anymoe run` of `model` (greedy, 10 prompt tokens in steps of 4, then 8
  // decode steps), under mpirun with `ranks` (0: one plain process).
  RunResult Run(const std::string& model, int ranks, const std::string& logits,
                const std::string& extra = "", const std::string& mpi_extra = "") {
    std::string cmd;
#ifdef ANYMOE_MPIRUN
    if (ranks > 0) {
      cmd = std::string(ANYMOE_MPIRUN) + " -np " + std::to_string(ranks) +
            " --oversubscribe --bind-to none " + mpi_extra + " ";
    }
#endif
    cmd += std::string(ANYMOE_BINARY) + " run -m " + model +
           " --prompt-tokens 5,6,7,8,9,10,11,12,13,14 -n 8 --temp 0 --ignore-eos --print-tokens"
           " --batch 4 -t 1 --logits-out " + logits + " " + extra;
    if (ranks > 0) cmd += " --ep";
    return Shell(cmd);
  }

  // The EP run's tokens and logits file equal the single-process run's, byte for byte.
  void ExpectSameAsOneProcess(const std::string& model, int ranks, const std::string& extra = "") {
    const RunResult one = Run(model, 0, Path("one.npy"), extra);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const RunResult ep = Run(model, ranks, Path("ep.npy"), extra);
    ASSERT_EQ(ep.exit_code, 0) << ep.err;
    const size_t at = one.out.find("tokens: ");
    ASSERT_NE(at, std::string::npos) << one.out;
    const std::string tokens = one.out.substr(at, one.out.find('\n', at) - at);
    EXPECT_NE(ep.out.find(tokens), std::string::npos) << "ep: " << ep.out << "\none: " << tokens;
    // Only rank 0 prints the text and the token line.
    EXPECT_EQ(ep.out.find(tokens), ep.out.rfind(tokens)) << ep.out;
    const std::string a = ReadFile(Path("one.npy")), b = ReadFile(Path("ep.npy"));
    ASSERT_GT(a.size(), 128u);
    EXPECT_TRUE(a == b) << model << " with " << ranks << " ranks: logits differ";
    // Every rank reports its share of the weights.
    for (int r = 0; r < ranks; ++r) {
      EXPECT_NE(ep.err.find("rank " + std::to_string(r) + " of " + std::to_string(ranks) +
                            ": resident weights"),
                std::string::npos)
          << ep.err;
    }
  }
};

TEST_F(ExpertParallel, TwoRanksMatchOneProcessOnEveryMoeGolden) {
  for (const char* model : {"moe/glm_moe_dsa", "moe/deepseek_v3", "moe/mixtral", "moe/qwen3_moe",
                            "moe/glm4_moe", "moe/glm4_moe_fused", "moe_gguf/glm_moe_dsa.gguf",
                            "moe_gguf/deepseek_v3.gguf", "moe_gguf/mixtral.gguf",
                            "moe_gguf/glm4_moe.q8_0.gguf"}) {
    SCOPED_TRACE(model);
    ExpectSameAsOneProcess(Golden(model), 2, "--exact");
  }
}

// --ep-no-overlap computes the shared expert after the exchange, not during
// it (the measurement of what overlapping gains): the same bits.
TEST_F(ExpertParallel, SharedExpertAfterTheExchangeMatchesOneProcess) {
  for (const char* model : {"moe/glm4_moe", "moe_gguf/deepseek_v3.gguf"}) {
    SCOPED_TRACE(model);
    ExpectSameAsOneProcess(Golden(model), 2, "--exact --ep-no-overlap");
  }
}

TEST_F(ExpertParallel, ThreeRanksMatchOneProcessWithoutExact) {
  // Uneven ranges (8 experts over 3 ranks), quantised and f32 weights.
  for (const char* model : {"moe/glm_moe_dsa", "moe/mixtral", "moe_gguf/glm4_moe.q8_0.gguf",
                            "moe_gguf/glm4_moe.q4_0.gguf"}) {
    SCOPED_TRACE(model);
    ExpectSameAsOneProcess(Golden(model), 3);
  }
}

// A device backend's ranks exchange their output rows through host memory
// (ExpertParallelLayer): the same tokens and logits as one process on that
// device, with MLA + DSA (glm_moe_dsa), a quantised GGUF and uneven ranges.
TEST_F(ExpertParallel, RanksOnOpenClMatchOneProcessOnOpenCl) {
  if (!CreateBackend("opencl", BackendOptions{.num_threads = 1}).ok()) {
    GTEST_SKIP() << "opencl unavailable";
  }
  for (const char* model : {"moe/glm_moe_dsa", "moe/qwen3_moe", "moe_gguf/glm4_moe.q8_0.gguf"}) {
    SCOPED_TRACE(model);
    ExpectSameAsOneProcess(Golden(model), 2, "--backend opencl");
  }
  ExpectSameAsOneProcess(Golden("moe_gguf/mixtral.gguf"), 3, "--backend opencl");
}

TEST_F(ExpertParallel, ScatteredPlacementMatchesOneProcess) {
  // Mixtral: 3 MoE layers of 8 experts; owners interleaved and lopsided.
  const std::string placement = WriteText(
      "placement.json",
      R"({"ranks": 2, "layers": [{"layer": 0, "owners": [1, 0, 1, 0, 0, 1, 1, 0]},
                                 {"layer": 2, "owners": [1, 1, 1, 1, 1, 1, 1, 0]}]})");
  ExpectSameAsOneProcess(Golden("moe/mixtral"), 2, "--ep-placement " + placement);
}

TEST_F(ExpertParallel, PlacementFromRoutingStatsMatchesOneProcess) {
  // The documented path: routing statistics of a run, tools/ep_placement.py, --ep-placement.
  const std::string model = Golden("moe/glm_moe_dsa");
  const RunResult stats = Run(model, 0, Path("one.npy"), "--routing-stats " + Path("stats.json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const RunResult tool = Shell("python3 " + std::string(ANYMOE_SOURCE_DIR) +
                               "/tools/ep_placement.py " + Path("stats.json") +
                               " --ranks 3 -o " + Path("placement.json"));
  ASSERT_EQ(tool.exit_code, 0) << tool.err;
  EXPECT_NE(tool.err.find("busiest rank"), std::string::npos) << tool.err;
  ExpectSameAsOneProcess(model, 3, "--ep-placement " + Path("placement.json"));
}

TEST_F(ExpertParallel, BadPlacementFileIsRefused) {
  const std::string placement = WriteText(
      "placement.json", R"({"layers": [{"layer": 1, "owners": [0, 1, 2, 0, 0, 1, 1, 0]}]})");
  const RunResult r = Run(Golden("moe/mixtral"), 2, Path("ep.npy"), "--ep-placement " + placement);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("layer 1: expert 2: owner 2 is not a rank in [0, 2)"), std::string::npos)
      << r.err;
}

TEST_F(ExpertParallel, KilledRankEndsTheJob) {
  // Rank 1 SIGKILLs itself at its 5th exchange (mid-prefill).
  const RunResult r = Run(Golden("moe/mixtral"), 2, Path("ep.npy"), "--ep-timeout 5",
                          "-x ANYMOE_EP_FAULT=kill:1:5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE((r.out + r.err).find("rank 1"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("signal 9"), std::string::npos) << r.out << r.err;
}

TEST_F(ExpertParallel, HungRankTimesOutOnTheOthers) {
  // Rank 1 SIGSTOPs itself: rank 0 gives up after --ep-timeout and ends the job.
  const RunResult r = Run(Golden("moe/mixtral"), 2, Path("ep.npy"), "--ep-timeout 2",
                          "-x ANYMOE_EP_FAULT=stop:1:5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 30);
  EXPECT_NE(r.err.find("rank 0 of 2: all-gather of expert outputs timed out after 2 s"),
            std::string::npos)
      << r.err;
}

TEST_F(ExpertParallel, DenseModelIsRefused) {
  const RunResult r = Run(Golden("llama_tiny"), 2, Path("ep.npy"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("expert parallelism needs a MoE model"), std::string::npos) << r.err;
}

TEST_F(ExpertParallel, ChatUnderMpirunIsRefused) {
#ifdef ANYMOE_MPIRUN
  // (serve runs under mpirun: tests/server/expert_parallel_serve_test.cc)
  const RunResult r = Shell(std::string(ANYMOE_MPIRUN) + " -np 2 --oversubscribe " + ANYMOE_BINARY +
                            " chat -m " + Golden("moe/mixtral"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("anymoe chat runs as one process"), std::string::npos) << r.err;
#endif
}

}  // namespace
}  // namespace anymoe
