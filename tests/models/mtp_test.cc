// The NextN / MTP layer: bound from HF folders (tests/golden/fp8, GLM-5 and
// DeepSeek-V3 style) and from the three GGUF layouts llama.cpp's converter
// writes (tests/golden/mtp: combined, trunk-only + MTP-only); loading it, or a
// file that holds it, leaves the trunk's logits bit for bit as they were; bad
// pairings are one-line errors.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model.h"
#include "models/model_file.h"
#include "models/mtp_block.h"

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

}  // namespace
}  // namespace anymoe
