// The CUDA backend's diagnostic lines on stderr, for the GPU check (tests/gpu/run.sh keeps them):
// which attention kernel ran, when FERRY_CUDA_LOG is set to anything but 0, and every cuBLASLt
// fallback, always. Each distinct line is written once per process, so a model that calls the
// same op thousands of times logs it once. Host code only; thread-safe.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace ferry::cuda {

inline bool kernel_log_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("FERRY_CUDA_LOG");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return enabled;
}

// Writes "ferry-cuda: <line>" unless the same line was written before.
inline void log_once(const std::string& line) {
  static std::mutex mutex;
  static std::set<std::string> written;
  const std::lock_guard lock(mutex);
  if (!written.insert(line).second) return;
  std::fprintf(stderr, "ferry-cuda: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace ferry::cuda
