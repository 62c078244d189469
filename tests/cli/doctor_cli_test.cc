// `anymoe doctor` and the device-backend flags as a user meets them: the op x
// dtype table of a model, a forced fallback showing up in it, and a memory
// budget below the plan failing at load with needed vs available bytes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/backend.h"

namespace anymoe {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

Result RunAnymoe(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + ANYMOE_BINARY + " " + args + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

const std::string kModel = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm_moe_dsa";

bool HasOpenCl() {
  for (const std::string& b : AvailableBackends()) {
    if (b == "opencl") return true;
  }
  return false;
}

// A line of the doctor's table: "op  dtype  native|fallback  calls".
bool HasRow(const std::string& out, const std::string& op, const std::string& where) {
  size_t at = 0;
  while ((at = out.find("\n" + op + " ", at)) != std::string::npos) {
    const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    if (line.find(" " + where + " ") != std::string::npos) return true;
    ++at;
  }
  return false;
}

TEST(Doctor, CpuListsEveryOpOfTheModelAsNative) {
  const Result r = RunAnymoe("doctor -m " + kModel + " --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* op : {"Embedding", "Matmul", "LatentAttention", "IndexerTopK", "Route",
                         "GroupedMatmul", "ScatterAddRows"}) {
    EXPECT_TRUE(HasRow(r.out, op, "native")) << op << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("0 on the CPU fallback"), std::string::npos) << r.out;
}

TEST(Doctor, OpenClShowsTheDeviceAndForcedFallbacks) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  const Result native = RunAnymoe("doctor -m " + kModel + " --backend opencl");
  if (native.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << native.out;
  ASSERT_EQ(native.exit_code, 0) << native.out;
  EXPECT_NE(native.out.find("memory:"), std::string::npos) << native.out;
  EXPECT_TRUE(HasRow(native.out, "Route", "native")) << native.out;

  const Result forced = RunAnymoe("doctor -m " + kModel + " --backend opencl",
                            "ANYMOE_DISABLE_OPS=Route,LatentAttention");
  ASSERT_EQ(forced.exit_code, 0) << forced.out;
  EXPECT_TRUE(HasRow(forced.out, "Route", "fallback")) << forced.out;
  EXPECT_TRUE(HasRow(forced.out, "LatentAttention", "fallback")) << forced.out;
  EXPECT_TRUE(HasRow(forced.out, "Matmul", "native")) << forced.out;
  EXPECT_NE(forced.out.find("Route on f32 runs on the CPU (disabled by ANYMOE_DISABLE_OPS)"),
            std::string::npos)
      << forced.out;
}

TEST(Doctor, MemoryBudgetBelowThePlanIsALoadError) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  const Result r = RunAnymoe("run -m " + kModel + " -p hi -n 2 --backend opencl --mem-budget 1000");
  if (r.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("the model needs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--mem-budget allows 1000 bytes"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace anymoe
