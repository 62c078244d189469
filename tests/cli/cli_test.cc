// The anymoe binary as a user meets it: the run command reproduces
// transformers' greedy ids and logits on the tiny llama checkpoint, sampling is
// repeatable by seed, and bad input (missing, truncated or hostile model files,
// bad token ids, prompts longer than the context, unknown templates) gives a
// one-line error and a non-zero exit code, never a crash. `anymoe tokenize`
// reads only a tokenizer (vocabulary-only GGUF, tokenizer-only folder).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/token_list.h"
#include "core/npy.h"
#include "testing/cpu_targets.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class Cli : public testing::TempDirTest {
 protected:
  RunResult Run(const std::vector<std::string>& args, const std::string& input = "") {
    std::string cmd = ANYMOE_BINARY;
    for (const auto& a : args) {
      cmd += ' ';  // not " " + Quote(a): GCC 12 warns about it (-Wrestrict, a false positive)
      cmd += Quote(a);
    }
    const std::string out = Path("stdout"), err = Path("stderr"), in = Path("stdin");
    WriteText("stdin", input);
    cmd += " >" + out + " 2>" + err + " <" + in;
    RunResult r;
    const int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // `anymoe run` greedy against transformers' generate: the same ids as
  // golden.json's greedy_ids, and each step's logits within `tolerance`
  // (--logits-out against decode_logits.npy). `model` is the golden folder
  // (default) or another file of its weights (a GGUF). Returns the largest
  // logit difference.
  float ExpectGreedyRunMatchesTransformers(const std::vector<std::string>& extra_args,
                                           float tolerance,
                                           const std::string& golden = "llama_tiny",
                                           const std::string& model = "") {
    const auto meta = nlohmann::json::parse(ReadFile(Golden(golden + "/golden.json")));
    const auto greedy = meta["greedy_ids"].get<std::vector<int32_t>>();
    const std::string n = std::to_string(greedy.size());
    const std::string logits = Path("logits.npy");
    std::vector<std::string> args = {
        "run",
        "-m",
        model.empty() ? Golden(golden) : Golden(model),
        "--prompt-tokens",
        cli::FormatTokenList(meta["prompt_ids"].get<std::vector<int32_t>>()),
        "-n",
        n,
        "--temp",
        "0",
        "--ignore-eos",
        "--print-tokens",
        "--logits-out",
        logits,
        "-t",
        "2"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const auto r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("tokens: " + cli::FormatTokenList(greedy)), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("generated: " + n + " tokens"), std::string::npos) << r.err;
    auto ours = ReadNpy(logits);
    EXPECT_TRUE(ours.ok()) << ours.status().message();
    if (!ours.ok()) return INFINITY;
    EXPECT_EQ(ours->shape, (std::vector<int64_t>{int64_t(greedy.size()), 512}));
    const auto want = ReadNpy(Golden(golden + "/decode_logits.npy"))->F32().value();
    const auto got = ours->F32().value();
    float diff = 0;
    for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
      diff = std::max(diff, std::fabs(want[i] - got[i]));
    }
    EXPECT_LT(diff, tolerance);
    return diff;
  }

  // A failing run: non-zero exit (not a signal), and one line on stderr that
  // contains every needle.
  void ExpectCleanError(const RunResult& r, const std::vector<std::string>& needles) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << r.err;
  }

  static std::string Golden(const std::string& rel) {
    return std::string(ANYMOE_GOLDEN_DIR) + "/" + rel;
  }

  // A valid llama GGUF header with one tensor, for corrupting.
  testing::GgufBuilder TinyGguf() {
    testing::GgufBuilder b;
    b.String("general.architecture", "llama");
    b.AddTensor({"token_embd.weight", {64, 8}, 0});
    return b;
  }
};

// With an f32 KV cache the CLI path is the reference arithmetic.
TEST_F(Cli, GreedyIdsAndLogitsMatchTransformers) {
  ExpectGreedyRunMatchesTransformers({"--kv-type", "f32"}, 1e-4f);
}

// The default cache on the cpu backend is f16 (as llama.cpp's): the same ids,
// every logit within the f16 bound of the model tests (llama_golden_test), and
// measurably off the f32 path, so the default is what is in effect.
TEST_F(Cli, DefaultF16CacheStaysWithinItsBoundOfTransformers) {
  const float by_default = ExpectGreedyRunMatchesTransformers({}, 2e-2f);
  EXPECT_GT(by_default, 1e-4f);
  EXPECT_EQ(ExpectGreedyRunMatchesTransformers({"--kv-type", "auto"}, 2e-2f), by_default);
  EXPECT_EQ(ExpectGreedyRunMatchesTransformers({"--kv-type", "f16"}, 2e-2f), by_default);
}

// DeepSeek-V3.2 (DSA with half-split indexer RoPE, YaRN, group-limited
// routing) and Kimi K2.5's text model (read from its vision wrapper), HF
// folders and llama.cpp's GGUF of them, through `run --exact` on every CPU
// target: transformers' 24 greedy ids, every step's logits within 1e-4.
TEST_F(Cli, DeepseekV32AndKimiK25RunExactOnEveryCpuTarget) {
  const std::pair<const char*, const char*> models[] = {
      {"moe/deepseek_v32", ""},
      {"moe/deepseek_v32", "moe_gguf/deepseek_v32.gguf"},
      {"moe/kimi_k25", ""},
      {"moe/kimi_k25", "moe_gguf/kimi_k25.gguf"}};
  for (const auto& [golden, model] : models) {
    for (const std::string& target : testing::CpuTargetNames()) {
      SCOPED_TRACE(std::string(*model ? model : golden) + " on " + target);
      ExpectGreedyRunMatchesTransformers({"--exact", "--kv-type", "f32", "--cpu-target", target},
                                         1e-4f, golden, model);
    }
  }
  // The wrapper's vision tower and projector are named once, not loaded.
  const auto r = Run({"run", "-m", Golden("moe/kimi_k25"), "-p", "hi", "-n", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("kimi_k25: the text model (tensors under 'language_model.'); the vision "
                       "tower and projector (23 tensors) are ignored"),
            std::string::npos)
      << r.err;
}

// GLM-5.3-Flash (KDA + NoPE MLA with KPool DSA, mHC): `run --exact` against
// transformers' greedy continuation of a 150-token prompt (prefilled in steps
// of the chunked KDA form, decoded in the recurrent one) on every CPU target.
TEST_F(Cli, Glm5NextRunsExactOnEveryCpuTarget) {
  for (const char* model : {"", "moe_gguf/glm5_next.gguf"}) {
    for (const std::string& target : testing::CpuTargetNames()) {
      SCOPED_TRACE(std::string(*model ? model : "moe/glm5_next") + " on " + target);
      ExpectGreedyRunMatchesTransformers({"--exact", "--kv-type", "f32", "--cpu-target", target},
                                         1e-4f, "moe/glm5_next", model);
    }
  }
  const auto r = Run({"run", "-m", Golden("moe/glm5_next"), "-p", "hi", "-n", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("glm5_next: the text model (tensors under 'model.language_model.'); the "
                       "vision tower and projector (25 tensors) are ignored"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, SameSeedSameTextDifferentSeedDifferentText) {
  auto run = [&](const std::string& seed) {
    const auto r = Run({"run", "-m", Golden("llama_tiny"), "-p", "hello world", "-n", "24",
                        "--temp", "1.0", "--seed", seed, "--ignore-eos", "--print-tokens"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(run("11"), run("11"));
  EXPECT_NE(run("11"), run("12"));
}

TEST_F(Cli, RoutingStatsCountEveryForwardedTokenTopKTimes) {
  const std::string stats = Path("routing.json");
  const auto r =
      Run({"run", "-m", Golden("moe/glm_moe_dsa"), "--prompt-tokens", "5,6,7,8,9,10,11,12,13,14",
           "-n", "6", "--temp", "0", "--ignore-eos", "--routing-stats", stats});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(ReadFile(stats));
  // 10 prompt tokens + 5 generated ones fed back (the 6th is never forwarded).
  const int64_t tokens = 10 + 6 - 1;
  EXPECT_EQ(j["tokens"], tokens);
  ASSERT_EQ(j["layers"].size(), 3u);  // layers 1..3 are MoE
  for (const auto& layer : j["layers"]) {
    int64_t sum = 0;
    for (int64_t c : layer["counts"]) sum += c;
    EXPECT_EQ(sum, tokens * j["experts_per_token"].get<int64_t>());
    EXPECT_EQ(layer["counts"].size(), 8u);
  }
}

TEST_F(Cli, InfoFromConfigAloneSizesGlm5) {
  const auto r = Run({"info", "-m", Golden("configs/glm5.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("743.91B total, 40.83B active"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("54912 values/token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("78 full / 0 shared"), std::string::npos) << r.out;
}

TEST_F(Cli, InfoCountsOnlyIndexedLayersAsFullOrShared) {
  // The tiny glm5_next: layers 0 and 3 are KDA (no indexer); of the indexed
  // layers 1, 2, 4 the config's indexer_types make layer 2 shared.
  const auto r = Run({"info", "-m", Golden("moe/glm5_next")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 full / 1 shared indexer layers"), std::string::npos) << r.out;
}

TEST_F(Cli, ChatKeepsTheConversationAndReusesItsCache) {
  // A system prompt longer than a turn, so reuse shows: the model's own template
  // (llama_tiny's ChatML) adds no default system prompt of its own.
  const auto r =
      Run({"chat", "-m", Golden("llama_tiny"), "--temp", "0", "-n", "5", "--stats", "--system",
           "You are a terse assistant. Answer every question in one short sentence."},
          "hello there\nand again\n/exit\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;  // banner + 2 stats
  // The second turn re-renders the whole conversation but only prefills what is new.
  const size_t second = r.err.rfind("prompt: ");
  ASSERT_NE(second, std::string::npos);
  const int new_tokens = std::stoi(r.err.substr(second + 8));
  const size_t first = r.err.find("prompt: ");
  EXPECT_LT(new_tokens, std::stoi(r.err.substr(first + 8))) << r.err;
}

TEST_F(Cli, MissingFile) {
  ExpectCleanError(Run({"run", "-m", Path("nope.gguf"), "-p", "hi"}),
                   {"nope.gguf", "no such file"});
}

TEST_F(Cli, TruncatedGguf) {
  auto bytes = TinyGguf().Build();
  bytes.resize(bytes.size() - 100);
  const std::string p = Write("truncated.gguf", bytes);
  ExpectCleanError(Run({"run", "-m", p, "-p", "hi"}), {"truncated.gguf", "token_embd.weight"});
  ExpectCleanError(Run({"info", "-m", p}), {"truncated.gguf"});
}

TEST_F(Cli, GgufTensorOffsetPastEnd) {
  auto b = TinyGguf();
  b.AddTensor({"output_norm.weight", {64}, 0, uint64_t(1) << 40});
  const std::string p = Write("offset.gguf", b.Build());
  ExpectCleanError(Run({"run", "-m", p, "-p", "hi"}), {"offset.gguf", "output_norm.weight"});
}

TEST_F(Cli, SafetensorsHeaderLongerThanFile) {
  std::filesystem::create_directories(dir_ / "model");
  std::filesystem::copy_file(Golden("llama_tiny/config.json"), dir_ / "model/config.json");
  std::vector<uint8_t> bytes;
  testing::PutLE<uint64_t>(bytes, 1 << 20);
  const std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  bytes.insert(bytes.end(), header.begin(), header.end());
  Write("model/model.safetensors", bytes);
  ExpectCleanError(Run({"run", "-m", Path("model"), "-p", "hi"}), {"model.safetensors"});
}

TEST_F(Cli, PromptTokenOutsideVocabulary) {
  ExpectCleanError(Run({"run", "-m", Golden("llama_tiny"), "--prompt-tokens", "1,512"}),
                   {"512", "vocabulary"});
  ExpectCleanError(Run({"run", "-m", Golden("llama_tiny"), "--prompt-tokens", "1,x"}), {"'x'"});
}

TEST_F(Cli, PromptLongerThanContext) {
  ExpectCleanError(Run({"run", "-m", Golden("llama_tiny"), "-c", "8", "--prompt-tokens",
                        "5,6,7,8,9,10,11,12,13,14"}),
                   {"10 tokens", "context of 8"});
}

// --kv-type takes auto, f32 or f16; f16 halves the cache on the cpu backend,
// and a device backend that keeps an f32 cache says so instead of running.
TEST_F(Cli, KvTypeF16RunsOnTheCpuAndIsRefusedElsewhere) {
  const auto r = Run({"run", "-m", Golden("llama_tiny"), "--kv-type", "f16", "--prompt-tokens",
                      "5,6,7", "-n", "4", "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto bad = Run({"run", "-m", Golden("llama_tiny"), "--kv-type", "q8_0", "-p", "hi"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("q8_0"), std::string::npos) << bad.err;
#ifdef ANYMOE_HAVE_OPENCL
  ExpectCleanError(Run({"run", "-m", Golden("llama_tiny"), "--backend", "opencl", "--kv-type",
                        "f16", "-p", "hi"}),
                   {"--kv-type f16", "cpu backend only"});
#endif
}

// --mla-form: the same greedy tokens in every form on the tiny DeepSeek-V3;
// "expanded" on a DSA model, any form but absorbed on a GQA model, and an
// unknown name are one-line errors naming the flag.
TEST_F(Cli, MlaFormRunsTheSameTokensAndIsRefusedWhereItCannotHold) {
  const std::vector<std::string> args = {
      "run",    "-m", Golden("moe/deepseek_v3"), "--prompt-tokens", "5,6,7,8,9,10,11,12", "-n", "8",
      "--temp", "0",  "--print-tokens"};
  const auto want = Run(args);
  ASSERT_EQ(want.exit_code, 0) << want.err;
  for (const char* form : {"absorbed", "expanded", "auto"}) {
    auto with = args;
    with.insert(with.end(), {"--mla-form", form});
    const auto r = Run(with);
    ASSERT_EQ(r.exit_code, 0) << form << ": " << r.err;
    EXPECT_EQ(r.out, want.out) << form;
  }
  ExpectCleanError(
      Run({"run", "-m", Golden("moe/glm_moe_dsa"), "--mla-form", "expanded", "-p", "hi"}),
      {"--mla-form expanded", "DSA"});
  ExpectCleanError(Run({"run", "-m", Golden("llama_tiny"), "--mla-form", "auto", "-p", "hi"}),
                   {"--mla-form auto", "no multi-head latent attention"});
  const auto bad = Run({"run", "-m", Golden("moe/deepseek_v3"), "--mla-form", "dense", "-p", "hi"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--mla-form"), std::string::npos) << bad.err;
}

// --cpu-target: every target the CPU has gives transformers' greedy ids on the
// tiny llama (f32 weights: the batch-invariant f32 kernels on each target), doctor
// names the target in use, and an unknown one is a one-line error listing them.
TEST_F(Cli, CpuTargetSelectsTheKernelsAndNamesTheChoices) {
  const auto want = Run({"run", "-m", Golden("llama_tiny"), "--prompt-tokens", "5,6,7", "-n", "8",
                         "--temp", "0", "--print-tokens"});
  ASSERT_EQ(want.exit_code, 0) << want.err;
  for (const char* target : {"avx2", "sse4", "neon", "scalar"}) {
    const auto r = Run({"run", "-m", Golden("llama_tiny"), "--prompt-tokens", "5,6,7", "-n", "8",
                        "--temp", "0", "--print-tokens", "--cpu-target", target});
    if (r.exit_code != 0) {  // not this machine's: the error names the choices
      EXPECT_NE(r.err.find("available: best"), std::string::npos) << r.err;
      continue;
    }
    EXPECT_EQ(r.out, want.out) << target;
    const auto doctor = Run({"doctor", "-m", Golden("llama_tiny"), "--cpu-target", target});
    EXPECT_NE(doctor.out.find(std::string("SIMD kernels ") + target + " "), std::string::npos)
        << doctor.out;
  }
  const auto bad = Run({"run", "-m", Golden("llama_tiny"), "-p", "hi", "--cpu-target", "avx9000"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("'avx9000' is not a target"), std::string::npos) << bad.err;
}

// --numa: distribute and isolate pin the threads (doctor's cpu line says
// where) and give the same greedy ids as none; an unknown mode is a one-line
// error naming the choices (CLI11's). (One node here: the memory policy is left alone,
// which the cpu line says too; the multi-node plans are core/numa_test.cc's.)
TEST_F(Cli, NumaPinsThreadsAndKeepsTheAnswer) {
  const auto want = Run({"run", "-m", Golden("llama_tiny"), "--prompt-tokens", "5,6,7", "-n", "8",
                         "--temp", "0", "--print-tokens", "-t", "2"});
  ASSERT_EQ(want.exit_code, 0) << want.err;
  for (const char* mode : {"none", "distribute", "isolate"}) {
    const auto r = Run({"run", "-m", Golden("llama_tiny"), "--prompt-tokens", "5,6,7", "-n", "8",
                        "--temp", "0", "--print-tokens", "-t", "2", "--numa", mode});
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.err;
    EXPECT_EQ(r.out, want.out) << mode;
    const auto doctor = Run({"doctor", "-m", Golden("llama_tiny"), "-t", "2", "--numa", mode});
    ASSERT_EQ(doctor.exit_code, 0) << doctor.err;
    const bool pinned = std::string(mode) != "none";
    EXPECT_EQ(doctor.out.find(std::string("numa ") + mode + ": 2 threads pinned to CPUs") !=
                  std::string::npos,
              pinned)
        << doctor.out;
  }
  const auto bad = Run({"run", "-m", Golden("llama_tiny"), "-p", "hi", "--numa", "numactl"});
  EXPECT_NE(bad.exit_code, 0);
  for (const char* needle : {"--numa", "numactl", "distribute", "isolate"}) {
    EXPECT_NE(bad.err.find(needle), std::string::npos) << bad.err;
  }
}

TEST_F(Cli, UnknownChatTemplateListsKnownOnes) {
  ExpectCleanError(
      Run({"run", "-m", Golden("llama_tiny"), "--chat", "-p", "hi", "--chat-template", "vicuna"}),
      {"vicuna", "chatml", "glm", "llama3"});
}

TEST_F(Cli, InfoDescribesTheModel) {
  const auto r = Run({"info", "-m", Golden("llama_tiny_tied")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("architecture: llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 query heads, 2 kv heads, head dim 16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scaling llama3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bf16"), std::string::npos) << r.out;
  // The run plan names the sampling state beside the model's memory.
  EXPECT_NE(r.out.find("+ sampling "), std::string::npos) << r.out;
}

// `anymoe prune` end to end: profile, info's saving, the written file, and
// a pruned run giving the same tokens as the written file; bad input refused.
TEST_F(Cli, PruneWritesTheModelThatPruningAtLoadRuns) {
  const std::string model = Golden("moe_gguf/mixtral.gguf"), profile = Path("p.json");
  ASSERT_EQ(Run({"profile", "-m", model, "-c", "32", "--chunks", "2", "-o", profile}).exit_code, 0);
  const std::string spec = profile + ":50%";
  auto info = Run({"info", "-m", model, "--expert-prune", spec, "--prune-by", "count"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("pruning:      pruned to 4 of 8 experts per layer by count"),
            std::string::npos) << info.out;
  const std::string out = Path("pruned.gguf");
  auto prune = Run({"prune", "-m", model, "--expert-prune", spec, "--prune-by", "count", "-o", out});
  ASSERT_EQ(prune.exit_code, 0) << prune.err;
  const std::vector<std::string> gen = {"-p", "hello", "-n", "8", "--temp", "0"};
  std::vector<std::string> at_load = {"run", "-m", model, "--expert-prune", spec, "--prune-by",
                                      "count"};
  std::vector<std::string> written = {"run", "-m", out};
  at_load.insert(at_load.end(), gen.begin(), gen.end());
  written.insert(written.end(), gen.begin(), gen.end());
  const auto a = Run(at_load), b = Run(written);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  ExpectCleanError(Run({"prune", "-m", model, "--expert-prune", profile + ":1", "-o", out}),
                   {"fewer than the 2 each token is routed to"});
  ExpectCleanError(Run({"run", "-m", model, "--expert-prune", profile, "-p", "x"}),
                   {"no PROFILE:KEEP"});
  ExpectCleanError(Run({"run", "-m", Golden("moe_gguf/glm4_moe.gguf"), "--expert-prune", spec,
                        "-p", "x"}),
                   {"profile_model_mismatch"});
}

// `anymoe tokenize` on the real Mixtral tokenizer, against HF tokenizers' ids
// (tests/golden/tokenizer/mixtral.golden.json) for strings of the shared corpus.
class TokenizeCli : public Cli {
 protected:
  // The golden case of a corpus string.
  static nlohmann::json CaseOf(const std::string& text) {
    const auto corpus = nlohmann::json::parse(ReadFile(Golden("tokenizer/corpus_large.json")));
    const auto golden = nlohmann::json::parse(ReadFile(Golden("tokenizer/mixtral.golden.json")));
    for (size_t i = 0; i < corpus["cases"].size(); ++i) {
      if (corpus["cases"][i]["text"] == text) return golden["cases"][i];
    }
    ADD_FAILURE() << "not in the corpus: " << text;
    return nlohmann::json::object();
  }
  static std::string IdList(std::vector<int32_t> ids, bool bos) {
    if (bos) ids.insert(ids.begin(), 1);
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
    return s + "]\n";
  }
  // A folder holding nothing but the tokenizer files.
  std::string TokenizerFolder() {
    std::filesystem::create_directories(Path("tok"));
    WriteText("tok/tokenizer.json", ReadFile(Golden("tokenizer/mixtral.tokenizer.json")));
    WriteText("tok/tokenizer_config.json",
              ReadFile(Golden("tokenizer/mixtral.tokenizer_config.json")));
    return Path("tok");
  }
};

TEST_F(TokenizeCli, VocabularyOnlyGgufGivesTheReferenceIdsWithBos) {
  const std::string text = "The quick brown fox jumps over the lazy dog.";
  const auto c = CaseOf(text);
  const std::string gguf = Golden("tokenizer/mixtral.vocab.gguf");
  auto r = Run({"tokenize", "-m", gguf, "-f", WriteText("in.txt", text), "--ids"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The GGUF holds llama.cpp's pipeline, which is the legacy tokenizer.json's.
  EXPECT_EQ(r.out, IdList(c.value("legacy", c["ids"]).get<std::vector<int32_t>>(), true));
  // Default output: llama-tokenize's "id -> 'piece'" lines.
  r = Run({"tokenize", "-m", gguf, "-p", "Hello world", "--show-count"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "     1 -> '<s>'\n 22557 -> ' Hello'\n  1526 -> ' world'\n"
                   "Total number of tokens: 3\n");
}

TEST_F(TokenizeCli, FolderWithOnlyTokenizerFilesAndSpecialParsing) {
  const std::string folder = TokenizerFolder();
  const std::string text = "a</s>b";
  const auto c = CaseOf(text);
  auto r = Run({"tokenize", "-m", folder, "-p", text, "--ids", "--no-bos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, IdList(c["ids"].get<std::vector<int32_t>>(), false));
  EXPECT_NE(r.out.find(" 2,"), std::string::npos) << "</s> parsed by default: " << r.out;
  r = Run({"tokenize", "-m", folder, "-p", text, "--ids", "--no-bos", "--no-parse-special"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, IdList(c["ids_no_special"].get<std::vector<int32_t>>(), false));
  r = Run({"tokenize", "-m", folder, "-p", "Hello world", "--pieces"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[\"<s>\", \"\u2581Hello\", \"\u2581world\"]\n");
}

TEST_F(TokenizeCli, BadInputIsAOneLineError) {
  ExpectCleanError(Run({"tokenize", "-m", Path("missing.gguf"), "-p", "x"}), {"missing.gguf"});
  ExpectCleanError(Run({"tokenize", "-m", TokenizerFolder()}), {"exactly one of -p, -f"});
  // A GGUF without a tokenizer.
  ExpectCleanError(Run({"tokenize", "-m", Write("t.gguf", TinyGguf().Build()), "-p", "x"}),
                   {"tokenizer.ggml.model"});
  std::filesystem::create_directories(Path("empty"));
  ExpectCleanError(Run({"tokenize", "-m", Path("empty"), "-p", "x"}), {"neither tokenizer.json nor tiktoken.model"});
}

}  // namespace
}  // namespace anymoe
