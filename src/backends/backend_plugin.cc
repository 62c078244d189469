// Finds and loads a device backend plugin (backend_plugin.h). Every failure is
// one line naming the backend, the file and the reason: not found (and where
// it was looked for), a library the plugin needs missing (dlerror names it),
// or a plugin from another build.
#include "backends/backend_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace anymoe {
namespace {

// The folder of the running executable ("" when /proc is unreadable).
std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  const std::string path(buf, size_t(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

Status PluginError(const std::string& name, const std::string& what) {
  return Status::Error("backend '" + name + "': " + what, ErrorKind::kUnavailable,
                       "backend_plugin");
}

// What the generated entry point of every plugin is (device_backends.cmake).
using PluginEntryFn = bool (*)(const char* abi, BackendEntry* entry);

}  // namespace

// Device drivers loaded through the plugins keep allocations alive until the
// process exits (PoCL: a 16-byte object inside libpocl with ~1.4 MB of LLVM
// data hanging off it, reported in some runs of a process that created several
// OpenCL contexts), which LeakSanitizer would report as ours. Suppressed by the
// module they are allocated in; leaks inside anymoe are still reported. This
// lives in the loader, not in a plugin: LeakSanitizer asks for the
// suppressions at start-up, before any plugin is dlopen'ed, and only sees the
// executable's definition (in the OpenCL plugin it was never used).
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libpocl\nleak:libOpenCL\nleak:libLLVM\n";
}
#endif

std::string BackendPluginFile(const std::string& name) { return "libanymoe-" + name + ".so"; }

std::vector<std::string> BackendPluginDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("ANYMOE_BACKEND_DIR"); env != nullptr && *env != '\0') {
    dirs.push_back(env);
  }
  if (const std::string exe = ExecutableDir(); !exe.empty()) dirs.push_back(exe + "/../lib/anymoe");
  return dirs;
}

Expected<BackendEntry> LoadBackendPlugin(const std::string& name, const char* abi) {
  const std::string file = BackendPluginFile(name);
  std::string looked;
  for (const std::string& dir : BackendPluginDirs()) {
    const std::string path = dir + "/" + file;
    looked += (looked.empty() ? "" : ", ") + dir;
    if (access(path.c_str(), F_OK) != 0) continue;
    // RTLD_NOW: a symbol the plugin needs and nobody defines fails here, not mid-run.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return PluginError(name, "cannot load " + path + ": " + (why ? why : "unknown error"));
    }
    auto entry_fn = reinterpret_cast<PluginEntryFn>(dlsym(handle, "anymoe_backend_plugin"));
    if (entry_fn == nullptr) {
      dlclose(handle);
      return PluginError(name, path + " is not an anymoe backend plugin");
    }
    BackendEntry entry;
    if (!entry_fn(abi, &entry) || entry.name != name || entry.create == nullptr) {
      dlclose(handle);
      return PluginError(name, path + " was built by another anymoe build (rebuild or reinstall it)");
    }
    return entry;  // the library stays loaded: the entry's functions live in it
  }
  return PluginError(name, file + " not found (looked in " + looked +
                               "; set ANYMOE_BACKEND_DIR to the folder that has it)");
}

}  // namespace anymoe
