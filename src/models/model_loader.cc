// Builds the model for a file: every supported architecture is a DecoderModel
// with the blocks its config names.
#include "models/config_loader.h"
#include <algorithm>

#include "models/decoder_model.h"
#include "models/memory_plan.h"
#include "models/model.h"

namespace anymoe {

Expected<std::unique_ptr<KvCache>> Model::NewCache(int64_t capacity) {
  ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool, NewPool(capacity));
  KvPool* p = pool.get();
  auto cache = std::make_unique<KvCache>(p, capacity, std::move(pool));
  RETURN_IF_ERROR(cache->Reserve(capacity));  // a private pool: take every block now
  return cache;
}

Expected<std::unique_ptr<Model>> LoadModelUnplanned(const ModelFile& file, Backend& backend,
                                                    const LoadOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(file));
  if (options.expert_subset != nullptr) {
    RETURN_IF_ERROR(options.expert_subset->Check(config).WithContext(file.path));
    options.expert_subset->ApplyTo(config);
  }
  return DecoderModel::Load(file, std::move(config), backend, options);
}

Expected<std::unique_ptr<Model>> LoadModel(const ModelFile& file, Backend& backend,
                                           const LoadOptions& options) {
  if (backend.wants_memory_plan()) {
    ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(file, options));
    RETURN_IF_ERROR(backend.ReserveMemory(plan).WithContext(file.path));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelUnplanned(file, backend, options));
  backend.FinishLoad();
  return model;
}

int64_t KvCacheTokens(const Model& model, const LoadOptions& options) {
  if (options.kv_cache_tokens > 0) return options.kv_cache_tokens;
  // Whole blocks per sequence: a cache of its own (NewCache) takes its
  // context rounded up to blocks, and the plan must hold `sequences` of them.
  const int64_t b = KvPool::kDefaultBlockTokens;
  const int64_t context = std::min(options.context, model.config().max_position_embeddings);
  return options.sequences * ((context + b - 1) / b * b);
}

}  // namespace anymoe
