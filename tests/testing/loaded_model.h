// A model file, a CPU backend and the model loaded on it, kept together for
// tests that run a model directly (the file and backend must outlive it).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "models/model.h"
#include "models/model_file.h"

namespace anymoe::testing {

struct LoadedModel {
  ModelFile file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
};

inline LoadedModel LoadCpuModel(const std::string& path, const BackendOptions& backend,
                                const LoadOptions& load) {
  LoadedModel l;
  l.file = std::move(OpenModelFile(path)).value();
  l.backend = std::move(CreateBackend("cpu", backend)).value();
  auto model = LoadModel(l.file, *l.backend, load);
  EXPECT_TRUE(model.ok()) << path << ": " << model.status().message();
  if (model.ok()) l.model = std::move(model).value();
  return l;
}

}  // namespace anymoe::testing
