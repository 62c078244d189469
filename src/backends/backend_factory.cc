// Creates a backend by name; the one place that knows the list of backends.
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"

namespace anymoe {

Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& name,
                                                 const BackendOptions& options) {
  if (name == "cpu") {
    int threads = options.num_threads;
    if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
    return std::unique_ptr<Backend>(new CpuBackend(threads, options.exact_matmul));
  }
  return Status::Error("unknown backend '" + name + "' (known: cpu)");
}

}  // namespace anymoe
