// `anymoe doctor --backend cuda` on a machine without a GPU (a CUDA build in
// CI): it still lists every op x dtype the model calls with where the CUDA
// backend would run it, says that no device was found, and exits 0.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "backends/backend.h"

namespace anymoe {
namespace {

// stdout and stderr of a shell command, and its exit code.
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(DoctorCuda, TableWithoutADevice) {
  if (DeviceSupportsTable("cuda") == nullptr) GTEST_SKIP() << "this build has no CUDA backend";
  if (CreateBackend("cuda", BackendOptions{}).ok()) GTEST_SKIP() << "a CUDA device is present";
  const auto [code, out] = Shell(std::string(ANYMOE_BINARY) + " doctor -m " + ANYMOE_GOLDEN_DIR +
                                 "/moe/glm_moe_dsa --backend cuda");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("device:   none: cuda: no CUDA device found"), std::string::npos) << out;
  // The MoE model's quantised-free golden: every pair native on cuda.
  EXPECT_NE(out.find("GroupedMatmul    f32     native"), std::string::npos) << out;
  EXPECT_NE(out.find("IndexerTopK      f32     native"), std::string::npos) << out;
  EXPECT_NE(out.find("0 on the CPU fallback"), std::string::npos) << out;
}

}  // namespace
}  // namespace anymoe
