// Device backends are plugins (libanymoe-<name>.so: backends/<name>/ and the
// shared device layer), loaded with dlopen the first time a run asks for one,
// so that a CPU run never maps or initialises the CUDA or OpenCL libraries.
// They lie in lib/anymoe/ beside the executable's folder: build/lib/anymoe for
// build/src/anymoe and build/tests/*, <prefix>/lib/anymoe when installed.
#pragma once

#include <string>
#include <vector>

#include "backends/backend_registry.h"

namespace anymoe {

// The file of backend `name`'s plugin: "libanymoe-cuda.so".
std::string BackendPluginFile(const std::string& name);

// The folders searched, in order: $ANYMOE_BACKEND_DIR when set, then
// <executable's folder>/../lib/anymoe.
std::vector<std::string> BackendPluginDirs();

// Loads backend `name`'s plugin (once per process; it stays loaded) and
// returns the entry it exports. `abi` is the fingerprint of the interface this
// build shares with its plugins: a plugin of another build is refused.
Expected<BackendEntry> LoadBackendPlugin(const std::string& name, const char* abi);

}  // namespace anymoe
