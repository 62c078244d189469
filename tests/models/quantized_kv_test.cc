// A q8_0 / q4_0 KV cache on the default model (SmolLM2, head_dim 64): a
// sequence's logits are the same bits whether its prompt is prefilled in one
// step, in chunks of 7 tokens or token by token, and whether it runs alone or
// batched with another sequence; a speculative-style rollback (length cut back,
// rows rewritten) gives the bits of never having written them; memory per
// token is ~0.53x (q8_0) and ~0.28x (q4_0) of f16's; blocks shared through the
// prefix cache give the bits of a whole prefill. Models whose heads do not
// fit 32-value blocks are refused at load with a message naming --kv-type.
// Needs models/ (fetched by `make test`).
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "models/kv_cache.h"
#include "models/model.h"
#include "models/model_file.h"

namespace anymoe {
namespace {

const std::string kModel = std::string(ANYMOE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

class QuantizedKv : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "models/ has no SmolLM2 GGUF";
    file_ = std::move(OpenModelFile(kModel)).value();
    backend_ = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 2})).value();
    auto model = LoadModel(file_, *backend_,
                           LoadOptions{.max_step_tokens = 64, .kv_type = GetParam()});
    ASSERT_TRUE(model.ok()) << model.status().message();
    model_ = std::move(model).value();
  }

  // The last token's logits after feeding `tokens` in steps of `step`.
  std::vector<float> Last(std::span<const int32_t> tokens, KvCache& cache, size_t step) {
    Tensor logits;
    for (size_t i = 0; i < tokens.size(); i += step) {
      logits = model_->Forward(tokens.subspan(i, std::min(step, tokens.size() - i)), cache, false)
                   .value();
    }
    std::vector<float> v(size_t(logits.elements()));
    backend_->ReadF32(logits, v);
    return v;
  }

  ModelFile file_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(QuantizedKv, SameBitsWhateverTheStepsBatchOrRollback) {
  std::vector<int32_t> prompt(150);
  std::iota(prompt.begin(), prompt.end(), 300);
  for (size_t i = 0; i < prompt.size(); i += 5) prompt[i] = int32_t(1000 + 17 * i);
  auto cache = std::move(model_->NewCache(256)).value();
  const std::vector<float> whole = Last(prompt, *cache, 64);
  for (size_t step : {size_t{7}, size_t{1}}) {
    auto c = std::move(model_->NewCache(256)).value();
    EXPECT_EQ(Last(prompt, *c, step), whole) << "steps of " << step;
  }
  // Rollback: 10 other tokens written and cut off, then the last 20 again.
  auto c = std::move(model_->NewCache(256)).value();
  Last(std::span(prompt).first(130), *c, 64);
  const std::vector<int32_t> drafts(10, 4242);
  Last(drafts, *c, 64);
  c->set_length(130);
  EXPECT_EQ(Last(std::span(prompt).subspan(130), *c, 64), whole);

  // Batched with another sequence in one pool, in steps of at most 64 tokens.
  auto pool = std::move(model_->NewPool(512)).value();
  KvCache a(pool.get(), 256), b(pool.get(), 256);
  const std::vector<int32_t> other(20, 77);
  const std::span<const int32_t> p(prompt);
  const Model::SequenceStep first[] = {{p.first(40), &a, false}, {other, &b, false}};
  ASSERT_TRUE(model_->ForwardBatch(first).ok());
  const Model::SequenceStep second[] = {{p.subspan(40, 60), &a, false},
                                        {std::span(other).first(1), &b, false}};
  ASSERT_TRUE(model_->ForwardBatch(second).ok());
  const Model::SequenceStep third[] = {{std::span(other).first(2), &b, false},
                                       {p.subspan(100), &a, false}};
  const Tensor logits = model_->ForwardBatch(third).value();
  std::vector<float> both(size_t(logits.elements()));
  backend_->ReadF32(logits, both);
  ASSERT_EQ(both.size(), 2 * whole.size());
  EXPECT_EQ(std::vector<float>(both.begin() + int64_t(whole.size()), both.end()), whole);
}

// Prefix caching over a quantised cache: a sequence that adopts another's
// published blocks for a shared prefix (the quantised rows as stored) and
// prefills only the rest gets the bits of prefilling the whole prompt itself.
TEST_P(QuantizedKv, CachedPrefixBlocksGiveTheBitsOfAWholePrefill) {
  std::vector<int32_t> prompt(150);
  std::iota(prompt.begin(), prompt.end(), 300);
  for (size_t i = 0; i < prompt.size(); i += 3) prompt[i] = int32_t(900 + 13 * i);
  auto pool = std::move(model_->NewPool(512)).value();
  const int64_t block = pool->block_tokens(), shared = 6 * block;
  KvCache a(pool.get(), 256);
  Last(prompt, a, 64);
  uint64_t hash = 0;
  for (int64_t i = 0; i * block < shared; ++i) {
    const auto tokens = std::span<const int32_t>(prompt).subspan(size_t(i * block), size_t(block));
    hash = PrefixBlockHash(hash, tokens);
    pool->Publish(a.block_ids()[size_t(i)], hash, tokens);
  }
  // Another prompt: the first 100 tokens in common, then its own.
  std::vector<int32_t> other(prompt.begin(), prompt.begin() + 100);
  for (int i = 0; i < 45; ++i) other.push_back(int32_t(2000 + 7 * i));
  std::vector<int32_t> blocks;
  hash = 0;
  for (int64_t i = 0; i * block < shared; ++i) {
    const auto tokens = std::span<const int32_t>(other).subspan(size_t(i * block), size_t(block));
    hash = PrefixBlockHash(hash, tokens);
    blocks.push_back(pool->AcquireCached(hash, tokens));
    ASSERT_GE(blocks.back(), 0) << "block " << i;
  }
  KvCache b(pool.get(), 256);
  b.Adopt(blocks);
  ASSERT_EQ(b.length(), shared);
  const std::vector<float> from_cache = Last(std::span(other).subspan(size_t(shared)), b, 64);
  auto fresh = std::move(model_->NewCache(256)).value();
  EXPECT_EQ(from_cache, Last(other, *fresh, 64));
}

TEST_P(QuantizedKv, StoresUnderHalfTheBytesOfF16PerToken) {
  auto q = std::move(model_->NewPool(64)).value();
  auto f16 = LoadModel(file_, *backend_, LoadOptions{.max_step_tokens = 64, .kv_type = DType::kF16});
  ASSERT_TRUE(f16.ok());
  auto h = std::move((*f16)->NewPool(64)).value();
  const double ratio = double(q->bytes_per_token()) / double(h->bytes_per_token());
  EXPECT_NEAR(ratio, GetParam() == DType::kQ8_0 ? 34.0 / 64.0 : 18.0 / 64.0, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedKv, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& info) { return std::string(Name(info.param)); });

TEST(QuantizedKvRefused, HeadsThatAreNotWholeBlocks) {
  auto file = OpenModelFile(std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny");  // head_dim 16
  ASSERT_TRUE(file.ok());
  auto backend = std::move(CreateBackend("cpu", BackendOptions{.num_threads = 1})).value();
  auto model = LoadModel(*file, *backend, LoadOptions{.max_step_tokens = 8, .kv_type = DType::kQ8_0});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("--kv-type q8_0: layer 0 has heads of 16 values"),
            std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace anymoe
