// The backends this build has, by name. Each backend registers itself (a
// Register<Name>Backend function in its folder, called once at startup from
// the list the build generates from the folders it compiles), so adding a
// backend never edits CreateBackend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace anymoe {

struct BackendEntry {
  std::string name;  // what --backend takes
  Expected<std::unique_ptr<Backend>> (*create)(const BackendOptions& options) = nullptr;
  // Backend::Supports answered without a device (`anymoe doctor` on a machine
  // without one); null for a backend that needs its device to tell.
  SupportsFn supports = nullptr;
  // A device backend: wrapped in FallbackBackend with a CPU behind it.
  bool device = true;
};

// Adds a backend; called by the Register*Backend functions.
void RegisterBackend(BackendEntry entry);
// Every registered backend, "cpu" first, then in registration order.
const std::vector<BackendEntry>& RegisteredBackends();

}  // namespace anymoe
