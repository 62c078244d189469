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
// the memory and the bytes decode attention reads); an explicit type stands.
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

  o.kv_type = DType::kQ8_0;
  auto bad = Engine::Load(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use f32 or f16"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace anymoe
