// Win32 side of MappedFile and DirectReader: CreateFileW + CreateFileMappingW + MapViewOfFile,
// FILE_FLAG_NO_BUFFERING + ReadFile at OVERLAPPED offsets, and an EXCEPTION_IN_PAGE_ERROR guard
// for copies out of views.
//
// Share mode: READ | WRITE | DELETE for both kinds of handle. Our handles only read, and sharing
// write access keeps Windows' answer to "someone shrinks a model file we hold" the honest one:
// SetEndOfFile on a mapped file fails with ERROR_USER_MAPPED_FILE, a file held only by a
// DirectReader may shrink (and the reader reports kIo), and an updater can still replace or delete
// the file (FILE_SHARE_DELETE) without a sharing violation — the same contract as on POSIX.
#include <windows.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"

// mingw GCC has no __try/__except: there guarded_copy resumes a context captured with
// RtlCaptureContext, which then returns a second time. Telling GCC so (as it knows for setjmp)
// stops it keeping values in registers across the call.
#if !defined(_MSC_VER)
extern "C" __declspec(dllimport) __attribute__((returns_twice)) void WINAPI
    RtlCaptureContext(PCONTEXT context);
#endif

namespace ferry::io::detail {
namespace {

HANDLE handle_of(NativeHandle handle) {
  return reinterpret_cast<HANDLE>(handle);
}
NativeHandle native(HANDLE handle) {
  return reinterpret_cast<NativeHandle>(handle);
}

const SYSTEM_INFO& system_info() {
  static const SYSTEM_INFO info = [] {
    SYSTEM_INFO i;
    GetSystemInfo(&i);
    return i;
  }();
  return info;
}

ErrorCode code_for(DWORD err) {
  return err == ERROR_NOT_ENOUGH_MEMORY || err == ERROR_OUTOFMEMORY || err == ERROR_COMMITMENT_LIMIT
             ? ErrorCode::kOutOfMemory
             : ErrorCode::kIo;
}

[[noreturn]] void throw_last_error(std::string_view what) {
  const DWORD err = GetLastError();
  throw win32_error(code_for(err), what, err);
}

// Opens an existing regular file for reading and returns its size. Directories and devices are
// refused with a plain message rather than Windows' "Access is denied".
HANDLE open_regular(const std::filesystem::path& path, DWORD flags, std::uint64_t& size) {
  HANDLE file = CreateFileW(path.c_str(), GENERIC_READ,
                            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                            OPEN_EXISTING, flags, nullptr);
  if (file == INVALID_HANDLE_VALUE) {
    const DWORD err = GetLastError();
    const DWORD attributes = GetFileAttributesW(path.c_str());
    if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
      throw Error(ErrorCode::kIo, display(path) + " is not a regular file");
    }
    SetLastError(err);
    return INVALID_HANDLE_VALUE;
  }
  BY_HANDLE_FILE_INFORMATION info;
  if (!GetFileInformationByHandle(file, &info)) {
    const DWORD err = GetLastError();
    CloseHandle(file);
    throw win32_error(ErrorCode::kIo, "cannot read the size of " + display(path), err);
  }
  if (GetFileType(file) != FILE_TYPE_DISK || (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
    CloseHandle(file);
    throw Error(ErrorCode::kIo, display(path) + " is not a regular file");
  }
  size = (static_cast<std::uint64_t>(info.nFileSizeHigh) << 32) | info.nFileSizeLow;
  return file;
}

std::size_t round_up_pow2(std::size_t value) {
  std::size_t p = 1;
  while (p < value) p *= 2;
  return p;
}

// The volume's logical sector size: the granularity FILE_FLAG_NO_BUFFERING demands. 0 if unknown.
std::size_t sector_size(HANDLE file, const std::filesystem::path& path) {
  FILE_STORAGE_INFO storage{};
  if (GetFileInformationByHandleEx(file, FileStorageInfo, &storage, sizeof storage) &&
      storage.LogicalBytesPerSector != 0) {
    return storage.LogicalBytesPerSector;
  }
  // Older file systems (and Wine) may not answer FileStorageInfo: ask the volume instead.
  std::error_code ec;
  const std::wstring absolute = std::filesystem::absolute(path, ec).wstring();
  if (ec) return 0;
  std::wstring volume(absolute.size() + 2, L'\0');
  if (!GetVolumePathNameW(absolute.c_str(), volume.data(), static_cast<DWORD>(volume.size()))) {
    return 0;
  }
  DWORD sectors_per_cluster = 0, bytes_per_sector = 0, free_clusters = 0, clusters = 0;
  if (!GetDiskFreeSpaceW(volume.c_str(), &sectors_per_cluster, &bytes_per_sector, &free_clusters,
                         &clusters)) {
    return 0;
  }
  return bytes_per_sector;
}

// ---- EXCEPTION_IN_PAGE_ERROR guard ----
// Reading a view whose pages can no longer be read in (network share lost, disk removed, a bad
// sector) raises EXCEPTION_IN_PAGE_ERROR. (Windows never lets a mapped file shrink: SetEndOfFile
// fails with ERROR_USER_MAPPED_FILE.) guarded_copy turns such a fault inside its source range
// into `false`; every other exception, access violations included, goes on to the other handlers
// untouched. (Wine reports a page lost under a mapping as an access violation, so there, as for
// any real bug, the process still stops.)

// The source range widened to whole pages: a copy may touch the rest of a page it reads from.
struct SourcePages {
  std::uintptr_t begin;
  std::uintptr_t end;
};

SourcePages source_pages(const void* src, std::size_t n) {
  const std::uintptr_t page = system_info().dwPageSize;
  const auto first = reinterpret_cast<std::uintptr_t>(src);
  return {first - first % page, (first + n + page - 1) / page * page};
}

bool is_in_page_error_in(const EXCEPTION_RECORD* record, SourcePages pages) {
  return record->ExceptionCode == EXCEPTION_IN_PAGE_ERROR && record->NumberParameters >= 2 &&
         record->ExceptionInformation[1] >= pages.begin &&
         record->ExceptionInformation[1] < pages.end;
}

#if !defined(_MSC_VER)
// A vectored handler does what __except would: guarded_copy captures its own context before
// copying; on an in-page error in its source range, on its thread, the handler resumes that
// context with `faulted` set, and guarded_copy returns false.

struct FaultGuard {
  CONTEXT resume;
  SourcePages pages{};
  volatile LONG active = 0;
  volatile LONG faulted = 0;
};

// The guarding thread's FaultGuard, in a TLS slot: TlsGetValue neither allocates nor locks, so
// the handler may call it whatever state the faulting thread was in.
DWORD g_tls_slot = TLS_OUT_OF_INDEXES;

LONG CALLBACK on_exception(EXCEPTION_POINTERS* pointers) {
  if (pointers->ExceptionRecord->ExceptionCode != EXCEPTION_IN_PAGE_ERROR) {
    return EXCEPTION_CONTINUE_SEARCH;
  }
  auto* guard = static_cast<FaultGuard*>(TlsGetValue(g_tls_slot));
  if (guard == nullptr || !guard->active ||
      !is_in_page_error_in(pointers->ExceptionRecord, guard->pages)) {
    return EXCEPTION_CONTINUE_SEARCH;
  }
  guard->active = 0;
  guard->faulted = 1;
  *pointers->ContextRecord = guard->resume;
  return EXCEPTION_CONTINUE_EXECUTION;
}

// Installs the handler once; false if Windows would not give a TLS slot or a handler (then
// copies run unguarded, as any plain read of a view does).
bool install_guard_handler() {
  static const bool installed = [] {
    g_tls_slot = TlsAlloc();
    if (g_tls_slot == TLS_OUT_OF_INDEXES) return false;
    // First in line: no other handler should see the faults that are ours.
    return AddVectoredExceptionHandler(1, on_exception) != nullptr;
  }();
  return installed;
}
#endif

}  // namespace

// ---- mappings ----

std::size_t page_size() {
  return system_info().dwPageSize;
}

void flush_to_disk(const std::filesystem::path& path) {
  HANDLE file = CreateFileW(path.c_str(), GENERIC_WRITE,
                            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                            OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) throw_last_error("cannot open " + display(path));
  const BOOL ok = FlushFileBuffers(file);
  const DWORD err = GetLastError();
  CloseHandle(file);
  if (!ok) throw win32_error(ErrorCode::kIo, "cannot flush " + display(path) + " to the disk", err);
}

std::size_t map_granularity() {
  return system_info().dwAllocationGranularity;
}

MappingHandles open_for_mapping(const std::filesystem::path& path) {
  MappingHandles handles;
  HANDLE file = open_regular(path, FILE_ATTRIBUTE_NORMAL, handles.size);
  if (file == INVALID_HANDLE_VALUE) throw_last_error("cannot open " + display(path));
  handles.file = native(file);
  // Windows cannot map an empty file (ERROR_FILE_INVALID); it only ever gets zero-length views,
  // which need no mapping object.
  if (handles.size == 0) return handles;
  HANDLE mapping = CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
  if (mapping == nullptr) {
    const DWORD err = GetLastError();
    CloseHandle(file);
    throw win32_error(code_for(err), "cannot map " + display(path), err);
  }
  handles.mapping = native(mapping);
  return handles;
}

void close_mapping(const MappingHandles& handles) noexcept {
  if (handles.mapping != kNoHandle) CloseHandle(handle_of(handles.mapping));
  if (handles.file != kNoHandle) CloseHandle(handle_of(handles.file));
}

void* map_region(const MappingHandles& handles, std::uint64_t offset, std::size_t length,
                 const std::filesystem::path& path) {
  const auto what = [&] {
    return "cannot map " + std::to_string(length) + " bytes of " + display(path) + " at offset " +
           std::to_string(offset);
  };
  if (handles.mapping == kNoHandle) {
    throw Error(ErrorCode::kInternal, what() + ": the file has no mapping object");
  }
  void* base = MapViewOfFile(handle_of(handles.mapping), FILE_MAP_READ,
                             static_cast<DWORD>(offset >> 32), static_cast<DWORD>(offset), length);
  if (base == nullptr) throw_last_error(what());
  return base;
}

void unmap_region(void* base, std::size_t) noexcept {
  UnmapViewOfFile(base);
}

void advise_willneed(const void* base, std::size_t length) noexcept {
  WIN32_MEMORY_RANGE_ENTRY range{const_cast<void*>(base), length};
  PrefetchVirtualMemory(GetCurrentProcess(), 1, &range, 0);  // a hint: failure changes nothing
}

void advise_dontneed(const void* base, std::size_t length) noexcept {
  // VirtualUnlock on pages that are not locked fails (ERROR_NOT_LOCKED) but, as documented, still
  // removes them from the working set; the mapping keeps them in the standby list.
  VirtualUnlock(const_cast<void*>(base), length);
}

#if defined(_MSC_VER)

// __except is a frame handler: Windows asks it before any unhandled-exception filter (the crash
// reporter's), whatever was installed first, so there is nothing to install.
void install_fault_guard() noexcept {}

bool guarded_copy(void* dst, const void* src, std::size_t n) noexcept {
  const SourcePages pages = source_pages(src, n);
  __try {
    std::memcpy(dst, src, n);
  } __except (is_in_page_error_in(GetExceptionInformation()->ExceptionRecord, pages)
                  ? EXCEPTION_EXECUTE_HANDLER
                  : EXCEPTION_CONTINUE_SEARCH) {
    return false;
  }
  return true;
}

#else

// Vectored handlers run before frame handlers and before the unhandled-exception filter (the
// crash reporter's), whatever was installed first.
void install_fault_guard() noexcept {
  install_guard_handler();
}

// noinline: the captured context must belong to this frame, not a caller's.
__attribute__((noinline)) bool guarded_copy(void* dst, const void* src, std::size_t n) noexcept {
  if (!install_guard_handler()) {
    std::memcpy(dst, src, n);
    return true;
  }
  FaultGuard guard;
  guard.pages = source_pages(src, n);
  void* const outer = TlsGetValue(g_tls_slot);
  TlsSetValue(g_tls_slot, &guard);
  RtlCaptureContext(&guard.resume);
  // Reached twice: once now, once more if the handler resumed the context after a fault. Only
  // `guard` (memory, volatile flags) and values fixed before the capture are used from here on.
  if (guard.faulted) {
    TlsSetValue(g_tls_slot, outer);
    return false;
  }
  guard.active = 1;
  std::memcpy(dst, src, n);
  guard.active = 0;
  TlsSetValue(g_tls_slot, outer);
  return true;
}

#endif

// ---- unbuffered reads ----

DirectHandle open_direct(const std::filesystem::path& path) {
  DirectHandle handle;
  HANDLE file = open_regular(path, FILE_FLAG_NO_BUFFERING, handle.size);
  handle.unbuffered = file != INVALID_HANDLE_VALUE;
  if (file == INVALID_HANDLE_VALUE && GetLastError() == ERROR_INVALID_PARAMETER) {
    // The file system refuses unbuffered I/O: read through the cache, sequentially.
    file = open_regular(path, FILE_FLAG_SEQUENTIAL_SCAN, handle.size);
  }
  if (file == INVALID_HANDLE_VALUE) throw_last_error("cannot open " + display(path));
  handle.file = native(file);
  handle.alignment =
      round_up_pow2(std::max<std::size_t>(system_info().dwPageSize, sector_size(file, path)));
  return handle;
}

void close_direct(const DirectHandle& handle) noexcept {
  if (handle.file != kNoHandle) CloseHandle(handle_of(handle.file));
}

std::size_t read_direct(const DirectHandle& handle, std::uint64_t offset, void* buffer,
                        std::size_t length, const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < length) {
    const std::uint64_t at = offset + done;
    OVERLAPPED overlapped{};
    overlapped.Offset = static_cast<DWORD>(at);
    overlapped.OffsetHigh = static_cast<DWORD>(at >> 32);
    // The caller caps a call at 64 MiB, so the request always fits a DWORD.
    const DWORD want = static_cast<DWORD>(std::min<std::size_t>(length - done, 0x80000000u));
    DWORD got = 0;
    if (!ReadFile(handle_of(handle.file), static_cast<char*>(buffer) + done, want, &got,
                  &overlapped)) {
      const DWORD err = GetLastError();
      if (err == ERROR_HANDLE_EOF) break;
      throw win32_error(code_for(err),
                        "reading " + display(path) + " at offset " + std::to_string(at) + " failed",
                        err);
    }
    if (got == 0) break;  // end of file
    done += got;
    // Only the end of the file gives a read that is not a whole number of sectors.
    if (done % handle.alignment != 0) break;
  }
  return done;
}

}  // namespace ferry::io::detail
