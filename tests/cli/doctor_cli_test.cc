// `anymoe doctor` and the device-backend flags as a user meets them: the op x
// dtype table of a model, a forced fallback showing up in it, a memory budget
// below the plan failing at load with needed vs available bytes, and the
// device backends as plugins (a CPU run loads no device library; a missing
// plugin is a one-line error).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "backends/backend.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

Result RunAnymoe(const std::string& args, const std::string& env = "",
                 const std::string& binary = ANYMOE_BINARY) {
  const std::string cmd = env + " " + binary + " " + args + " 2>&1";
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

// The CPU's matmul kernel per weight type: SmolLM2 Q4_1 (q4_1 layers, a q8_0
// embedding) names one for each type, on the best target and on the portable
// scalar one, and none is the per-row dequantise + f32 path.
TEST(Doctor, NamesTheCpuMatmulKernelOfEveryWeightType) {
  const std::string path = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present (make model)";
  for (const std::string target : {"best", "scalar"}) {
    const Result r = RunAnymoe("doctor -m " + path + " --cpu-target " + target);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const size_t at = r.out.find("\ncpu matmul (");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(" q4_1 int"), std::string::npos) << line;
    EXPECT_NE(line.find(" q8_0 int"), std::string::npos) << line;
    // dequant-f32 only for large steps ("int16 to 32 rows, dequant-f32 above").
    for (size_t d = line.find("dequant-f32"); d != std::string::npos;
         d = line.find("dequant-f32", d + 1)) {
      EXPECT_EQ(line.compare(d, 17, "dequant-f32 above"), 0) << line;
    }
    if (target == "scalar") {
      EXPECT_NE(line.find("(scalar): "), std::string::npos) << line;
    }
  }
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

// FP8 block-scaled checkpoints (GLM-5's and DeepSeek-V3's official form): the
// OpenCL kernels decode the weights and apply their scales, no fallback.
TEST(Doctor, OpenClRunsFp8WeightsWithBlockScalesNatively) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  for (const char* name : {"deepseek_v3", "glm_moe_dsa"}) {
    const Result r = RunAnymoe("doctor -m " + std::string(ANYMOE_GOLDEN_DIR) + "/fp8/" + name +
                               " --backend opencl");
    if (r.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << r.out;
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(HasRow(r.out, "Matmul", "f8_e4m3 native")) << name << "\n" << r.out;
    EXPECT_TRUE(HasRow(r.out, "GroupedMatmul", "f8_e4m3 native")) << name << "\n" << r.out;
    EXPECT_NE(r.out.find(" native, 0 on the CPU fallback"), std::string::npos) << name << "\n"
                                                                               << r.out;
  }
}

// --cpu-moe / --n-cpu-moe N: the expert matmuls of those layers are "cpu-moe"
// rows (on the CPU by request, not fallbacks), the placement line names the
// layers and the host bytes, and the device plan shrinks by them.
TEST(Doctor, CpuMoeShowsThePlacement) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  const std::string model = std::string(ANYMOE_GOLDEN_DIR) + "/moe/glm4_moe";  // layer 0 dense
  struct Case {
    std::string flags;
    bool native, cpu_moe;   // GroupedMatmul rows expected
    std::string placement;  // "" when none is printed
  };
  for (const Case& c :
       {Case{"--cpu-moe", false, true, "placement: routed experts of layers 0-2 on the CPU ("},
        Case{"--n-cpu-moe 2", true, true, "placement: routed experts of layers 0-1 on the CPU ("},
        Case{"", true, false, ""}}) {
    const Result r = RunAnymoe("doctor -m " + model + " --backend opencl " + c.flags);
    if (r.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << r.out;
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(HasRow(r.out, "GroupedMatmul", "native"), c.native) << c.flags << "\n" << r.out;
    EXPECT_EQ(HasRow(r.out, "GroupedMatmul", "cpu-moe"), c.cpu_moe) << c.flags << "\n" << r.out;
    if (c.placement.empty()) {
      EXPECT_EQ(r.out.find("placement:"), std::string::npos) << r.out;
    } else {
      EXPECT_NE(r.out.find(c.placement), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("0 on the CPU fallback, 1 with their weights on the CPU (--cpu-moe)"),
                std::string::npos)
          << r.out;
    }
  }
}

TEST(Doctor, MemoryBudgetBelowThePlanIsALoadError) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  const Result r = RunAnymoe("run -m " + kModel + " -p hi -n 2 --backend opencl --mem-budget 1000");
  if (r.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("the model needs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--mem-budget allows 1000 bytes"), std::string::npos) << r.out;
}

// The libraries the dynamic loader opened for a run (LD_DEBUG=files), linked
// or loaded with dlopen, one "file=..." line each.
Result RunAnymoeListingLibraries(const std::string& args) {
  return RunAnymoe(args, "LD_DEBUG=files");
}

bool Loaded(const Result& r, const std::string& library) {
  return r.out.find("file=" + library) != std::string::npos ||
         r.out.find("/" + library) != std::string::npos;
}

TEST(BackendPlugins, CpuRunLoadsNoDeviceLibrary) {
  const Result r = RunAnymoeListingLibraries("run -m " + std::string(ANYMOE_GOLDEN_DIR) +
                                             "/llama_tiny -p hi -n 2 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_TRUE(Loaded(r, "libstdc++.so")) << r.out;  // the listing works
  for (const char* lib : {"libcudart", "libcublas", "libcuda.so", "libOpenCL", "libanymoe-"}) {
    EXPECT_FALSE(Loaded(r, lib)) << lib;
  }
}

TEST(BackendPlugins, OpenClRunLoadsItsPlugin) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  const Result r = RunAnymoeListingLibraries("run -m " + std::string(ANYMOE_GOLDEN_DIR) +
                                             "/llama_tiny -p hi -n 2 -t 1 --backend opencl");
  if (r.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Loaded(r, "libanymoe-opencl.so")) << r.out;
  EXPECT_TRUE(Loaded(r, "libOpenCL")) << r.out;
  EXPECT_FALSE(Loaded(r, "libcudart")) << r.out;  // only the plugin asked for
}

class BackendPluginDir : public testing::TempDirTest {};

// The binary copied away from its lib/anymoe: --backend opencl fails with one
// line naming the file and where it was looked for; ANYMOE_BACKEND_DIR finds it.
TEST_F(BackendPluginDir, MissingPluginIsOneLineErrorAndTheEnvironmentFindsIt) {
  if (!HasOpenCl()) GTEST_SKIP() << "built without OpenCL";
  const std::string binary = Path("anymoe");
  std::filesystem::copy_file(ANYMOE_BINARY, binary);
  const std::string run = "run -m " + std::string(ANYMOE_GOLDEN_DIR) +
                          "/llama_tiny -p hi -n 2 -t 1 --backend opencl";
  const Result missing = RunAnymoe(run, "", binary);
  EXPECT_EQ(missing.exit_code, 1) << missing.out;
  EXPECT_NE(missing.out.find("backend 'opencl': libanymoe-opencl.so not found (looked in " +
                             Path("")),
            std::string::npos)
      << missing.out;
  EXPECT_EQ(missing.out.find('\n'), missing.out.size() - 1) << missing.out;  // one line

  const std::string plugins =
      std::filesystem::path(ANYMOE_BINARY).parent_path().string() + "/../lib/anymoe";
  const Result found = RunAnymoe(run, "ANYMOE_BACKEND_DIR=" + plugins, binary);
  if (found.out.find("no OpenCL device") != std::string::npos) GTEST_SKIP() << found.out;
  EXPECT_EQ(found.exit_code, 0) << found.out;
  EXPECT_NE(found.out.find("generated: 2 tokens"), std::string::npos) << found.out;
}

}  // namespace
}  // namespace anymoe
