// Process and system memory as the OS reports it: what Ferry shows per step and what the
// planner budgets against. Windows: GetProcessMemoryInfo, GlobalMemoryStatusEx. Linux: /proc.
#pragma once

#include <cstdint>

namespace ferry::memory {

struct ProcessMemory {
  // Resident set (Linux VmRSS) / working set (Windows), including mapped file pages.
  std::uint64_t resident_bytes = 0;
  std::uint64_t peak_resident_bytes = 0;
  // The part of the resident set that is mapped file pages (Linux RssFile; 0 where unknown).
  std::uint64_t resident_file_bytes = 0;
  // Private memory the process has committed: Windows PrivateUsage (commit charge); Linux
  // RssAnon + VmSwap (private memory that needs RAM or swap behind it).
  std::uint64_t commit_bytes = 0;
  // Windows PeakPagefileUsage; Linux: the largest commit seen by any sample in this process.
  std::uint64_t peak_commit_bytes = 0;
};

struct SystemMemory {
  std::uint64_t total_bytes = 0;
  // What can be allocated without swapping (Linux MemAvailable, Windows ullAvailPhys).
  std::uint64_t available_bytes = 0;
};

// Throws Error(kIo) when the OS refuses to answer.
ProcessMemory sample_process_memory();
SystemMemory sample_system_memory();

// Makes the C library's allocator give large freed blocks back to the OS at once, so that what a
// stage frees shows as freed (called first thing by Ferry's programs and test binaries). glibc
// otherwise raises its mmap threshold to the largest block freed so far (up to 32 MiB) and keeps
// up to twice that of freed memory in the heap: measured, a cancelled H3 run then left 24-84 MiB
// of private memory behind in 4 runs of 5, against 0.2 MiB with the threshold fixed at 1 MiB.
// Does nothing where there is no such behaviour (Windows' heap, other C libraries).
void configure_allocator();

// Restarts peak_resident_bytes from the current resident set, so a phase can measure its own
// peak. Returns false where the OS cannot do it (Windows).
bool reset_peak_resident();

}  // namespace ferry::memory
