// The NextN / MTP layer: bound from HF folders (tests/golden/fp8, GLM-5 and
// DeepSeek-V3 style) and from the three GGUF layouts llama.cpp's converter
// writes (tests/golden/mtp: combined, trunk-only + MTP-only); loading it, or a
// file that holds it, leaves the trunk's logits bit for bit as they were; bad
// pairings are one-line errors.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model.h"
#include "models/model_file.h"
#include "models/mtp_block.h"
#include "core/npy.h"

namespace anymoe {
namespace {

const std::string kGolden = std::string(ANYMOE_GOLDEN_DIR) + "/";

std::vector<int32_t> Prompt() {
  std::ifstream in(kGolden + "moe/glm_moe_dsa/golden.json");
  return nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
}

struct Loaded {
  ModelFile file;
  std::optional<ModelFile> mtp_file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

Expected<Loaded> Load(const std::string& path, bool load_mtp, const std::string& mtp_path = "") {
  Loaded l;
  ASSIGN_OR_RETURN(l.file, OpenModelFile(kGolden + path));
  LoadOptions options{.max_step_tokens = 64};
  options.load_mtp = load_mtp;
  if (!mtp_path.empty()) {
    ASSIGN_OR_RETURN(ModelFile f, OpenModelFile(kGolden + mtp_path));
    l.mtp_file = std::move(f);
    options.mtp_file = &*l.mtp_file;
  }
  l.backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
  ASSIGN_OR_RETURN(l.model, LoadModel(l.file, *l.backend, options));
  return l;
}

std::vector<float> PromptLogits(Loaded& l) {
  auto cache = l.model->NewCache(64);
  EXPECT_TRUE(cache.ok());
  const std::vector<int32_t> prompt = Prompt();
  auto logits = l.model->Forward(prompt, **cache, true);
  EXPECT_TRUE(logits.ok()) << logits.status().message();
  std::vector<float> out(size_t(logits->elements()));
  l.backend->ReadF32(*logits, out);
  return out;
}

std::vector<float> Values(Loaded& l, const Tensor& t) {
  std::vector<float> v(size_t(t.elements()));
  l.backend->ReadF32(t, v);
  return v;
}

TEST(MtpTest, CombinedGgufRunsOnlyTheTrunk) {
  auto combined = Load("mtp/glm_moe_dsa_mtp.gguf", false);
  auto trunk = Load("mtp/glm_moe_dsa_trunk.gguf", false);
  ASSERT_TRUE(combined.ok()) << combined.status().message();
  ASSERT_TRUE(trunk.ok()) << trunk.status().message();
  EXPECT_EQ(combined->model->config().num_layers, 4);
  EXPECT_EQ(combined->model->config().num_nextn_layers, 1);
  EXPECT_EQ(trunk->model->config().num_nextn_layers, 0);
  EXPECT_EQ(combined->model->mtp(), nullptr);  // not asked for
  EXPECT_EQ(PromptLogits(*combined), PromptLogits(*trunk));
}

TEST(MtpTest, BindsFromTheCombinedFileAndFromThePair) {
  auto combined = Load("mtp/glm_moe_dsa_mtp.gguf", true);
  auto pair = Load("mtp/glm_moe_dsa_trunk.gguf", false, "mtp/mtp-glm_moe_dsa.gguf");
  ASSERT_TRUE(combined.ok()) << combined.status().message();
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  for (Loaded* l : {&*combined, &*pair}) {
    const MtpBlock* mtp = l->model->mtp();
    ASSERT_NE(mtp, nullptr);
    EXPECT_EQ(mtp->layer_index(), 4);
    EXPECT_FALSE(mtp->own_embed());  // GLM-5 style: the trunk's embedding and head
    EXPECT_FALSE(mtp->own_head());
    EXPECT_EQ(mtp->eh_proj().dim(0), 64);
    EXPECT_EQ(mtp->eh_proj().dim(1), 128);
    EXPECT_EQ(mtp->eh_proj().dtype, DType::kQ8_0);
    EXPECT_GT(mtp->cache_spec().latent_dim + mtp->cache_spec().k_dim, 0);
  }
  const MtpBlock &a = *combined->model->mtp(), &b = *pair->model->mtp();
  EXPECT_EQ(Values(*combined, a.eh_proj()), Values(*pair, b.eh_proj()));
  EXPECT_EQ(Values(*combined, a.head_norm()), Values(*pair, b.head_norm()));
  // Binding it changes nothing the trunk computes.
  auto plain = Load("mtp/glm_moe_dsa_mtp.gguf", false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(PromptLogits(*combined), PromptLogits(*plain));
}

TEST(MtpTest, BindsFromHfFoldersInBothStyles) {
  auto glm = Load("fp8/glm_moe_dsa", true);
  auto deepseek = Load("fp8/deepseek_v3", true);
  ASSERT_TRUE(glm.ok()) << glm.status().message();
  ASSERT_TRUE(deepseek.ok()) << deepseek.status().message();
  ASSERT_NE(glm->model->mtp(), nullptr);
  ASSERT_NE(deepseek->model->mtp(), nullptr);
  EXPECT_EQ(glm->model->mtp()->layer_index(), 4);
  EXPECT_FALSE(glm->model->mtp()->own_head());
  EXPECT_EQ(deepseek->model->mtp()->layer_index(), 3);
  EXPECT_TRUE(deepseek->model->mtp()->own_embed());  // DeepSeek-V3 keeps its own
  EXPECT_TRUE(deepseek->model->mtp()->own_head());
  auto plain = Load("fp8/glm_moe_dsa", false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(PromptLogits(*glm), PromptLogits(*plain));
}

TEST(MtpTest, BadFilesAndPairsAreOneLineErrors) {
  auto only = Load("mtp/mtp-glm_moe_dsa.gguf", false);
  ASSERT_FALSE(only.ok());
  EXPECT_NE(only.status().message().find("an MTP-only file (no trunk layers)"), std::string::npos)
      << only.status().message();
  auto wrong = Load("moe_gguf/deepseek_v3.gguf", false, "mtp/mtp-glm_moe_dsa.gguf");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("MTP file is glm-dsa, the trunk deepseek2"),
            std::string::npos)
      << wrong.status().message();
  auto none = Load("mtp/glm_moe_dsa_trunk.gguf", true);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("declares no MTP (NextN) layer"), std::string::npos);
}

// The MTP step (DecoderModel::ForwardMtp) against the independent torch
// reference of tools/gen_mtp_reference.py (transformers' decoder layer for
// the NextN weights; the enorm / hnorm / eh_proj / shared head step written
// from the DeepSeek-V3 report) on the tiny GLM-5 (shared embedding and head,
// own DSA indexer) and DeepSeek-V3 (own embedding and head) with FP8
// weights: row i joins the trunk's hidden state at i with token i + 1. Then
// the same rows one step at a time give the same logits bit for bit (the
// draft loop's use).
class MtpForward : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpForward, MatchesTheTorchReference) {
  const std::string name = GetParam();
  auto l = Load("fp8/" + name, true);
  ASSERT_TRUE(l.ok()) << l.status().message();
  Model& m = *l->model;
  ASSERT_NE(m.mtp(), nullptr);
  std::ifstream in(kGolden + "fp8/" + name + "/golden.json");
  const auto ids = nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
  const int64_t t = int64_t(ids.size()) - 1, vocab = m.config().vocab_size;
  auto cache = m.NewCache(64);
  ASSERT_TRUE(cache.ok());
  ASSERT_TRUE(m.Forward(ids, **cache, /*all_logits=*/true).ok());
  const std::vector<float> hidden = Values(*l, m.last_hidden());
  ASSERT_EQ(int64_t(hidden.size()), (t + 1) * m.config().hidden_size);

  auto mtp_cache = m.NewMtpCache(64);
  ASSERT_TRUE(mtp_cache.ok()) << mtp_cache.status().message();
  const std::span<const int32_t> next = std::span(ids).subspan(1);
  auto logits = m.ForwardMtp(next, m.last_hidden().RowSlice(0, t), **mtp_cache, true);
  ASSERT_TRUE(logits.ok()) << logits.status().message();
  EXPECT_EQ((*mtp_cache)->length(), t);
  const std::vector<float> got = Values(*l, *logits);
  auto want = ReadNpy(kGolden + "mtp/fp8_" + name + "_mtp_logits.npy");
  ASSERT_TRUE(want.ok()) << want.status().message();
  const std::vector<float> ref = want->F32().value();
  ASSERT_EQ(got.size(), ref.size());
  double max_err = 0, max_ref = 0;
  int argmax_same = 0;
  for (int64_t r = 0; r < t; ++r) {
    int64_t a = 0, b = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const size_t i = size_t(r * vocab + v);
      max_err = std::max(max_err, double(std::abs(got[i] - ref[i])));
      max_ref = std::max(max_ref, double(std::abs(ref[i])));
      if (got[i] > got[size_t(r * vocab + a)]) a = v;
      if (ref[i] > ref[size_t(r * vocab + b)]) b = v;
    }
    argmax_same += a == b;
  }
  // FP8 weights run as f32 tiles with f32 activations: f32 rounding only
  // (GLM-5 9.3e-6, DeepSeek-V3 7.0e-6 on x86-64 AVX-512).
  std::printf("%s MTP logits vs torch: max |diff| %.3g, max |ref| %.3g, argmax %d of %lld rows\n",
              name.c_str(), max_err, max_ref, argmax_same, static_cast<long long>(t));
  EXPECT_LT(max_err, 2e-4) << "max |ref| " << max_ref;
  EXPECT_EQ(argmax_same, t);

  // One row at a time, as drafting runs it: bitwise the batched rows.
  auto one_cache = m.NewMtpCache(64);
  ASSERT_TRUE(one_cache.ok());
  const int64_t h = m.config().hidden_size;
  std::vector<float> row_hidden(static_cast<size_t>(h));
  for (int64_t r = 0; r < t; ++r) {
    // The trunk's row r, from host memory (the cpu backend reads it in place).
    std::copy_n(hidden.begin() + r * h, h, row_hidden.begin());
    const Tensor hr = Tensor::Of(row_hidden.data(), DType::kF32, {1, h});
    auto one = m.ForwardMtp(next.subspan(size_t(r), 1), hr, **one_cache, false);
    ASSERT_TRUE(one.ok()) << one.status().message();
    const std::vector<float> row = Values(*l, *one);
    ASSERT_EQ(0, std::memcmp(row.data(), got.data() + r * vocab, size_t(vocab) * sizeof(float)))
        << "row " << r;
  }
  EXPECT_EQ((*one_cache)->length(), t);
}

INSTANTIATE_TEST_SUITE_P(Models, MtpForward, ::testing::Values("glm_moe_dsa", "deepseek_v3"));

}  // namespace
}  // namespace anymoe
