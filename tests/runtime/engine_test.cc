// Engine-level defaults that the CLI commands inherit.
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include "models/kv_cache.h"

namespace anymoe {
namespace {

EngineOptions TinyLlama() {
  EngineOptions o;
  o.model_path = std::string(ANYMOE_GOLDEN_DIR) + "/llama_tiny";
  o.threads = 1;
  o.progress = false;
  return o;
}

// Unless asked otherwise the cpu backend caches keys and values in f16 (half
// the memory and the bytes decode attention reads); an explicit type stands;
// types it cannot keep, and q8_0 for heads that are not whole blocks, are
// refused at load.
TEST(Engine, KvCacheIsF16OnTheCpuBackendUnlessAskedOtherwise) {
  EngineOptions o = TinyLlama();
  auto by_default = Engine::Load(o);
  ASSERT_TRUE(by_default.ok()) << by_default.status().message();
  EXPECT_EQ((*by_default)->kv_type(), DType::kF16);
  EXPECT_EQ(DefaultKvType((*by_default)->backend()), DType::kF16);

  o.kv_type = DType::kF32;
  auto f32 = Engine::Load(o);
  ASSERT_TRUE(f32.ok()) << f32.status().message();
  EXPECT_EQ((*f32)->kv_type(), DType::kF32);

  o.kv_type = DType::kQ4_1;
  auto bad = Engine::Load(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use f32, f16, q8_0 or q4_0"), std::string::npos)
      << bad.status().message();

  o.kv_type = DType::kQ8_0;  // tiny llama's heads of 16 values are no whole q8_0 block
  auto unfit = Engine::Load(o);
  ASSERT_FALSE(unfit.ok());
  EXPECT_NE(unfit.status().message().find("needs multiples of 32"), std::string::npos)
      << unfit.status().message();
}

}  // namespace
}  // namespace anymoe
