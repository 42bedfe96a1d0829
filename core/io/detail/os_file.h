// The OS calls behind MappedFile and DirectReader: one implementation in os_file_posix.cpp and
// one in os_file_win32.cpp. Everything here throws ferry::Error on failure, except where noted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ferry::io::detail {

// A file descriptor (POSIX) or HANDLE (Win32) stored as an integer; kNoHandle when unused.
using NativeHandle = std::intptr_t;
inline constexpr NativeHandle kNoHandle = -1;

// The path as UTF-8, for messages.
std::string display(const std::filesystem::path& path);
// A path from UTF-8 text (std::filesystem::u8path is deprecated in C++20).
std::filesystem::path path_from_utf8(std::string_view text);

// ---- mappings ----

struct MappingHandles {
  NativeHandle file = kNoHandle;
  NativeHandle mapping = kNoHandle;  // Win32 file-mapping object; unused on POSIX
  std::uint64_t size = 0;
};

std::size_t map_granularity();
// The VM page size: the unit of residency (advise_*).
std::size_t page_size();
MappingHandles open_for_mapping(const std::filesystem::path& path);
void close_mapping(const MappingHandles& handles) noexcept;
// Maps `length` bytes at `offset` (a multiple of map_granularity()) read-only and shared.
void* map_region(const MappingHandles& handles, std::uint64_t offset, std::size_t length,
                 const std::filesystem::path& path);
void unmap_region(void* base, std::size_t length) noexcept;
void advise_willneed(const void* base, std::size_t length) noexcept;
void advise_dontneed(const void* base, std::size_t length) noexcept;

// Copies n bytes from mapped memory; returns false (and leaves dst partly written) if reading
// the source raised SIGBUS / EXCEPTION_IN_PAGE_ERROR. Other faults are not caught.
bool guarded_copy(void* dst, const void* src, std::size_t n) noexcept;

// Installs the handler behind guarded_copy for the whole process (guarded_copy does on its first
// call; the app does at start, io::install_process_guards). Later calls do nothing. Other fault
// handlers may come before or after it: on Windows the guard's (a vectored handler, or __except)
// always runs before an unhandled-exception filter; on POSIX the guard passes the faults that are
// not its own to the handler it replaced, and a handler installed after it hands the guard its
// SIGBUS first (resume_guarded_copy).
void install_fault_guard() noexcept;

#ifndef _WIN32
// For a SIGBUS handler that replaced the guard's (the crash reporter): when `fault_address` lies
// in the source of a guarded copy running on this thread, ends that copy (it returns false) and
// does not return; otherwise returns. Async-signal-safe.
void resume_guarded_copy(const void* fault_address) noexcept;
#endif

// Flushes a finished file to the disk (fsync / FlushFileBuffers), so a rename that publishes
// it cannot survive a crash that loses its contents. Throws Error(kIo).
void flush_to_disk(const std::filesystem::path& path);

// ---- unbuffered reads ----

struct DirectHandle {
  NativeHandle file = kNoHandle;
  std::uint64_t size = 0;
  std::size_t alignment = 4096;  // buffer address, offset and length granularity for reads
  bool unbuffered = false;       // false when the file system refused O_DIRECT (tmpfs)
};

DirectHandle open_direct(const std::filesystem::path& path);
void close_direct(const DirectHandle& handle) noexcept;
// One positional read of `length` bytes at `offset` into `buffer`: all three are multiples of
// handle.alignment (checked by the caller). Returns the bytes read, short only at end of file.
std::size_t read_direct(const DirectHandle& handle, std::uint64_t offset, void* buffer,
                        std::size_t length, const std::filesystem::path& path);

}  // namespace ferry::io::detail
