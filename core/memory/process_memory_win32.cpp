// Windows readings behind process_memory.h: GetProcessMemoryInfo and GlobalMemoryStatusEx.
// clang-format off
#include <windows.h>
#include <psapi.h>  // after windows.h, which it needs
// clang-format on

#include <algorithm>
#include <atomic>

#include "core/error.h"
#include "core/memory/process_memory.h"

namespace ferry::memory {
namespace {

std::atomic<std::uint64_t> g_peak_commit{0};

// Committed private memory, summed over the address space. Only used where the OS leaves
// PrivateUsage at zero (Wine does); Windows always counts it.
std::uint64_t committed_private_bytes() {
  std::uint64_t total = 0;
  MEMORY_BASIC_INFORMATION info;
  const char* address = nullptr;
  while (VirtualQuery(address, &info, sizeof info) == sizeof info) {
    if (info.State == MEM_COMMIT && info.Type == MEM_PRIVATE) total += info.RegionSize;
    const char* next = static_cast<const char*>(info.BaseAddress) + info.RegionSize;
    if (next <= address) break;
    address = next;
  }
  return total;
}

}  // namespace

ProcessMemory sample_process_memory() {
  PROCESS_MEMORY_COUNTERS_EX counters{};
  counters.cb = sizeof counters;
  if (!GetProcessMemoryInfo(GetCurrentProcess(),
                            reinterpret_cast<PROCESS_MEMORY_COUNTERS*>(&counters),
                            sizeof counters)) {
    throw win32_error(ErrorCode::kIo, "cannot read this process's memory counters", GetLastError());
  }
  ProcessMemory m;
  m.resident_bytes = counters.WorkingSetSize;
  m.peak_resident_bytes = counters.PeakWorkingSetSize;
  m.resident_file_bytes = 0;  // the working set is not split by kind without a full page walk
  m.commit_bytes = counters.PrivateUsage != 0 ? counters.PrivateUsage : committed_private_bytes();
  // PeakPagefileUsage is the OS's own peak of the commit charge; the largest sample seen stands
  // in where the OS keeps none.
  std::uint64_t peak = g_peak_commit.load();
  while (m.commit_bytes > peak && !g_peak_commit.compare_exchange_weak(peak, m.commit_bytes)) {
  }
  m.peak_commit_bytes = std::max<std::uint64_t>({counters.PeakPagefileUsage, peak, m.commit_bytes});
  return m;
}

SystemMemory sample_system_memory() {
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof status;
  if (!GlobalMemoryStatusEx(&status)) {
    throw win32_error(ErrorCode::kIo, "cannot read the system's memory status", GetLastError());
  }
  return SystemMemory{status.ullTotalPhys, status.ullAvailPhys};
}

// Windows keeps PeakWorkingSetSize for the life of the process; nothing resets it.
bool reset_peak_resident() {
  return false;
}

void configure_allocator() {}  // the Windows heap returns large blocks (VirtualFree) itself

}  // namespace ferry::memory
