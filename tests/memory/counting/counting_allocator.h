// A process-wide allocation counter for the tests that show a step allocates nothing
// (architecture.md §3 rule 3). counting_allocator.cpp replaces the global operator new and delete,
// so whatever thread allocates (the caller, the CPU backend's pool, the streamer's IO thread and
// copy worker) is counted. An executable that links it counts every allocation of the process:
// such tests are executables of their own (ferry_offload_tests, ferry_allocation_tests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::test {

// Starts counting from zero, on every thread.
void start_counting_allocations();
// Stops counting; returns the allocations made since start_counting_allocations().
std::uint64_t stop_counting_allocations();
// The size of the last allocation counted.
std::size_t last_counted_allocation_size();
// Where the first allocation counted since start_counting_allocations() was made: a backtrace on
// glibc (for the message of a failing test), empty elsewhere or when none was counted.
std::string first_counted_allocation_site();

}  // namespace ferry::test
