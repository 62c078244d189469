// Warm start from an expert profile (runtime/warm_start.h): with streamed
// experts and a cache smaller than the routed experts, the logits of the same
// steps are bitwise those of a cold start; the warm start reads the profile's
// hottest experts (as many as the cache holds), the pinned ones are in the
// cache after every step although others are evicted, and a profile of
// another model or a pin share out of range is refused with its code.
#include "runtime/warm_start.h"

#include <gtest/gtest.h>

#include "models/model_fingerprint.h"
#include "runtime/expert_profile.h"
#include "testing/loaded_model.h"
#include "testing/test_files.h"

namespace anymoe {
namespace {

const std::string kGolden = std::string(ANYMOE_GOLDEN_DIR) + "/";

using Loaded = testing::LoadedModel;

Loaded Load(const std::string& path, int64_t slots) {
  LoadOptions options{.max_step_tokens = 64};
  options.expert_cache = ExpertCacheOptions{.enabled = slots > 0, .slots = slots};
  return testing::LoadCpuModel(path, BackendOptions{.num_threads = 2}, options);
}

// A prefill of 20 tokens and 12 decode steps; every logit in order. `after`
// runs after each step.
std::vector<float> Steps(Loaded& l, const std::function<void()>& after = nullptr) {
  Model& m = *l.model;
  const int64_t vocab = m.config().vocab_size;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(int32_t((i * 29 + 3) % vocab));
  auto cache = std::move(m.NewCache(64)).value();
  std::vector<float> out;
  const auto keep = [&](const Tensor& t) {
    std::vector<float> v(size_t(t.elements()));
    l.backend->ReadF32(t, v);
    out.insert(out.end(), v.begin(), v.end());
    if (after) after();
  };
  keep(std::move(m.Forward(prompt, *cache, true)).value());
  for (int i = 0; i < 12; ++i) {
    const int32_t token = int32_t((i * 41 + 5) % vocab);
    keep(std::move(m.Forward({&token, 1}, *cache, false)).value());
  }
  return out;
}

class WarmStartTest : public testing::TempDirTest {
 protected:
  // The profile of Steps on the model at `path`, written to profile.json.
  std::string Profile(const std::string& path) {
    Loaded l = Load(path, 0);
    ExpertProfiler profiler(l.model->config(), path, ModelFingerprint(l.file), "test");
    l.model->SetObserver(&profiler.observer());
    Steps(l);
    l.model->SetObserver(nullptr);
    EXPECT_TRUE(profiler.Snapshot().Write(Path("profile.json")).ok());
    return Path("profile.json");
  }
};

TEST_F(WarmStartTest, SameLogitsAndPinnedExpertsStay) {
  const std::string model = kGolden + "moe_gguf/glm4_moe.gguf";
  const std::string profile = Profile(model);
  constexpr int64_t kSlots = 6;  // of 2 layers x 8 experts

  Loaded cold = Load(model, kSlots);
  const std::vector<float> expected = Steps(cold);
  const ExpertCacheStats cold_stats = cold.model->routing_stats().cache;

  Loaded warm = Load(model, kSlots);
  auto start =
      WarmStart::Start(*warm.model, warm.file,
                       WarmStartOptions{.profile = profile, .pin_percent = 50, .progress = false});
  ASSERT_TRUE(start.ok()) << start.status().message();
  (*start)->Wait();
  ExpertCache& cache = *warm.model->expert_cache();
  const ExpertCacheStats before = cache.stats();
  EXPECT_EQ(before.warm_loads, uint64_t(kSlots));
  EXPECT_EQ(before.pinned, kSlots / 2);
  EXPECT_EQ(before.lookups, 0u);

  auto parsed = ExpertProfile::Load(profile);
  ASSERT_TRUE(parsed.ok());
  const std::vector<ExpertRef> ranked = parsed->Ranked(ExpertRanking::kFrequency);
  const std::vector<ExpertRef> pinned(ranked.begin(), ranked.begin() + kSlots / 2);
  for (size_t i = 0; i < size_t(kSlots); ++i) {
    EXPECT_TRUE(cache.IsCached(ranked[i].layer, ranked[i].expert)) << i;
  }
  int checks = 0;
  const std::vector<float> got = Steps(warm, [&] {
    for (const ExpertRef& x : pinned) {
      EXPECT_TRUE(cache.IsCached(x.layer, x.expert)) << x.layer << "/" << x.expert;
      ++checks;
    }
  });
  EXPECT_EQ(checks, 13 * (kSlots / 2));
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  const ExpertCacheStats after = cache.stats();
  EXPECT_GT(after.evictions, 0u);  // the unpinned slots did turn over
  EXPECT_EQ(after.pinned, kSlots / 2);
  // The warm cache starts with the profile's experts: fewer misses on the same steps.
  EXPECT_LT(after.misses, cold_stats.misses);
}

TEST_F(WarmStartTest, RefusesAnotherModelsProfileAndBadShares) {
  const std::string profile = Profile(kGolden + "moe_gguf/glm4_moe.gguf");
  Loaded q8 = Load(kGolden + "moe_gguf/glm4_moe.q8_0.gguf", 6);
  auto start = WarmStart::Start(*q8.model, q8.file, WarmStartOptions{.profile = profile});
  ASSERT_FALSE(start.ok());
  EXPECT_EQ(start.status().code(), "profile_model_mismatch") << start.status().message();
  Loaded same = Load(kGolden + "moe_gguf/glm4_moe.gguf", 6);
  start = WarmStart::Start(*same.model, same.file,
                           WarmStartOptions{.profile = profile, .pin_percent = 80});
  ASSERT_FALSE(start.ok());
  EXPECT_EQ(start.status().code(), "pin_out_of_range");
  // Every expert resident: the profile is checked, nothing is read.
  Loaded resident = Load(kGolden + "moe_gguf/glm4_moe.gguf", 0);
  start = WarmStart::Start(*resident.model, resident.file,
                           WarmStartOptions{.profile = profile, .progress = false});
  EXPECT_TRUE(start.ok()) << start.status().message();
}

}  // namespace
}  // namespace anymoe
