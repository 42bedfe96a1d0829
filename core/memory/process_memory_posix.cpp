// Linux /proc readings behind process_memory.h.
#include <atomic>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/memory/process_memory.h"

namespace ferry::memory {
namespace {

std::atomic<std::uint64_t> g_peak_commit{0};

// Reads "Key:   <n> kB" lines from a /proc file into the fields named in `keys`.
template <std::size_t N>
void read_kib_fields(const char* file, const char* const (&keys)[N], std::uint64_t* (&out)[N]) {
  std::ifstream in(file);
  if (!in) throw Error(ErrorCode::kIo, std::string("cannot read ") + file);
  std::string line;
  while (std::getline(in, line)) {
    for (std::size_t i = 0; i < N; ++i) {
      const std::size_t key_len = std::strlen(keys[i]);
      if (line.compare(0, key_len, keys[i]) == 0 && line.size() > key_len && line[key_len] == ':') {
        unsigned long long kib = 0;
        if (std::sscanf(line.c_str() + key_len + 1, "%llu", &kib) == 1) *out[i] = kib * 1024;
      }
    }
  }
}

}  // namespace

ProcessMemory sample_process_memory() {
  ProcessMemory m;
  std::uint64_t anon = 0;
  std::uint64_t swap = 0;
  const char* const keys[] = {"VmRSS", "VmHWM", "RssFile", "RssAnon", "VmSwap"};
  std::uint64_t* out[] = {&m.resident_bytes, &m.peak_resident_bytes, &m.resident_file_bytes, &anon,
                          &swap};
  read_kib_fields("/proc/self/status", keys, out);
  m.commit_bytes = anon + swap;
  std::uint64_t peak = g_peak_commit.load();
  while (m.commit_bytes > peak && !g_peak_commit.compare_exchange_weak(peak, m.commit_bytes)) {
  }
  m.peak_commit_bytes = std::max(peak, m.commit_bytes);
  return m;
}

SystemMemory sample_system_memory() {
  SystemMemory s;
  const char* const keys[] = {"MemTotal", "MemAvailable"};
  std::uint64_t* out[] = {&s.total_bytes, &s.available_bytes};
  read_kib_fields("/proc/meminfo", keys, out);
  return s;
}

bool reset_peak_resident() {
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux ≥ 4.0).
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

void configure_allocator() {
#if defined(__GLIBC__)
  // A fixed threshold also turns glibc's dynamic adjustment off.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
}

}  // namespace ferry::memory
