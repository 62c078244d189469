// The embedding output of the forward pass (SequenceStep::embeddings,
// Model::last_embeddings()): asking for it leaves the logits bitwise as they
// were, it holds the final-normed hidden state of every row of the steps that
// ask (in step order, and of those only), and their mean is transformers'
// mean-pooled last_hidden_state (tools/gen_embedding_golden.py), on a dense
// llama and on the GLM-5 MoE (MLA + DSA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/model.h"
#include "models/model_file.h"

namespace anymoe {
namespace {

// float32 engine (f32 KV cache) vs the float32 reference summed in float64:
// the rows differ by rounding in the matmuls' order (measured 1.6e-6 on these
// O(1) values).
constexpr double kTolerance = 2e-5;

class EmbeddingsOutput : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = std::string(ANYMOE_GOLDEN_DIR) + "/" + GetParam();
    auto file = OpenModelFile(dir);
    ASSERT_TRUE(file.ok()) << file.status().message();
    file_ = std::move(file).value();
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    model_ = std::move(LoadModel(file_, *backend_, LoadOptions{.max_step_tokens = 128})).value();
    golden_ = nlohmann::json::parse(std::ifstream(dir + "/embeddings.json"));
  }
  std::vector<float> Read(const Tensor& t) {
    std::vector<float> v(size_t(t.elements()));
    backend_->ReadF32(t, v);
    return v;
  }

  ModelFile file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  nlohmann::json golden_;
};

TEST_P(EmbeddingsOutput, LogitsUnchangedAndRowsAreTheNormedHiddenStates) {
  const int64_t hidden = model_->config().hidden_size;
  const auto& cases = golden_["cases"];
  ASSERT_GE(cases.size(), 3u);
  const std::vector<int32_t> a = cases[1]["ids"].get<std::vector<int32_t>>(),
                             b = cases[5]["ids"].get<std::vector<int32_t>>(),
                             c = cases[4]["ids"].get<std::vector<int32_t>>();
  auto run = [&](bool embed) {
    auto pool = std::move(model_->NewPool(512)).value();
    std::vector<std::unique_ptr<KvCache>> caches;
    for (int i = 0; i < 3; ++i) caches.push_back(std::make_unique<KvCache>(pool.get(), 128));
    // The middle step is a generation's (no embeddings either way).
    const Model::SequenceStep steps[] = {{a, caches[0].get(), false, embed},
                                         {b, caches[1].get(), true, false},
                                         {c, caches[2].get(), false, embed}};
    auto logits = model_->ForwardBatch(steps);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    std::vector<float> l = Read(*logits), e;
    if (embed) e = Read(model_->last_embeddings());
    return std::pair(l, e);
  };
  const auto [plain, none] = run(false);
  const auto [logits, rows] = run(true);
  ASSERT_EQ(plain.size(), logits.size());
  EXPECT_EQ(std::memcmp(plain.data(), logits.data(), plain.size() * sizeof(float)), 0);
  EXPECT_TRUE(none.empty());
  ASSERT_EQ(rows.size(), (a.size() + c.size()) * size_t(hidden));
  // Each asking step's rows, mean-pooled, against transformers.
  size_t row = 0;
  for (const auto& [ids, golden] : {std::pair(&a, &cases[1]), std::pair(&c, &cases[4])}) {
    const std::vector<double> want = (*golden)["mean"].get<std::vector<double>>();
    ASSERT_EQ(int64_t(want.size()), hidden);
    for (int64_t k = 0; k < hidden; ++k) {
      double sum = 0;
      for (size_t r = 0; r < ids->size(); ++r) sum += rows[(row + r) * size_t(hidden) + size_t(k)];
      EXPECT_NEAR(sum / double(ids->size()), want[size_t(k)], kTolerance) << "dim " << k;
    }
    row += ids->size();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EmbeddingsOutput,
                         ::testing::Values("llama_tiny", "moe/glm_moe_dsa"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = std::isalnum(uint8_t(ch)) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace anymoe
