// POSIX side of MappedFile and DirectReader: open/fstat, mmap PROT_READ + MAP_SHARED, madvise,
// O_DIRECT + pread, and a SIGBUS guard for copies out of mappings.
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io::detail {
namespace {

int fd_of(NativeHandle handle) { return static_cast<int>(handle); }

int open_regular(const std::filesystem::path& path, int flags, std::uint64_t& size) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw posix_error(ErrorCode::kIo, "cannot read the size of " + display(path), err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kIo, display(path) + " is not a regular file");
  }
  size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

// ---- SIGBUS guard ----
// A copy out of a mapping whose file shrank (or whose device went away) raises SIGBUS. The guard
// turns a SIGBUS at an address inside the source range into a `false` return on the copying
// thread; any other SIGBUS goes to the handler that was installed before ours (the default one
// terminates, ASan's reports, the crash reporter's reports and terminates). A handler installed
// after ours (the crash reporter, when the app installs it after its first reads) asks the guard
// first through resume_guarded_copy, so the guard wins inside its ranges in either order.

struct FaultGuard {
  sigjmp_buf env;
  const char* begin = nullptr;
  const char* end = nullptr;
  volatile sig_atomic_t active = 0;
};

thread_local FaultGuard* t_guard = nullptr;
struct sigaction g_previous_sigbus {};

void on_sigbus(int sig, siginfo_t* info, void* context) {
  resume_guarded_copy(info->si_addr);
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(sig, info, context);
  } else if (g_previous_sigbus.sa_handler != SIG_DFL && g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(sig);
  } else {
    // Default action: restore it; returning re-runs the faulting access, which then terminates.
    signal(SIGBUS, SIG_DFL);
  }
}

}  // namespace

void resume_guarded_copy(const void* fault_address) noexcept {
  FaultGuard* guard = t_guard;
  const char* address = static_cast<const char*>(fault_address);
  if (guard == nullptr || !guard->active || address < guard->begin || address >= guard->end) {
    return;
  }
  guard->active = 0;
  // The guard's own handler runs with SA_NODEFER, but one that called us may not (the crash
  // reporter's): SIGBUS would stay blocked on this thread after the jump, and the next lost page
  // would kill the process instead of failing its copy.
  sigset_t bus;
  sigemptyset(&bus);
  sigaddset(&bus, SIGBUS);
  pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
  siglongjmp(guard->env, 1);
}

void install_fault_guard() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
}

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t map_granularity() { return page_size(); }

MappingHandles open_for_mapping(const std::filesystem::path& path) {
  MappingHandles handles;
  const int fd = open_regular(path, 0, handles.size);
  if (fd < 0) throw posix_error(ErrorCode::kIo, "cannot open " + display(path), errno);
  handles.file = fd;
  return handles;
}

void close_mapping(const MappingHandles& handles) noexcept {
  if (handles.file != kNoHandle) ::close(fd_of(handles.file));
}

void* map_region(const MappingHandles& handles, std::uint64_t offset, std::size_t length,
                 const std::filesystem::path& path) {
  void* base = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd_of(handles.file),
                      static_cast<off_t>(offset));
  if (base == MAP_FAILED) {
    throw posix_error(errno == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kIo,
                      "cannot map " + std::to_string(length) + " bytes of " + display(path) +
                          " at offset " + std::to_string(offset),
                      errno);
  }
  return base;
}

void unmap_region(void* base, std::size_t length) noexcept { ::munmap(base, length); }

void advise_willneed(const void* base, std::size_t length) noexcept {
  ::madvise(const_cast<void*>(base), length, MADV_WILLNEED);
}

void advise_dontneed(const void* base, std::size_t length) noexcept {
  ::madvise(const_cast<void*>(base), length, MADV_DONTNEED);
}

bool guarded_copy(void* dst, const void* src, std::size_t n) noexcept {
  install_fault_guard();
  FaultGuard guard;
  guard.begin = static_cast<const char*>(src);
  guard.end = guard.begin + n;
  FaultGuard* const outer = t_guard;
  t_guard = &guard;
  if (sigsetjmp(guard.env, 0) != 0) {
    t_guard = outer;
    return false;
  }
  guard.active = 1;
  std::memcpy(dst, src, n);
  guard.active = 0;
  t_guard = outer;
  return true;
}

void flush_to_disk(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw posix_error(ErrorCode::kIo, "cannot open " + display(path), errno);
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    throw posix_error(ErrorCode::kIo, "cannot flush " + display(path) + " to the disk", err);
  }
}

DirectHandle open_direct(const std::filesystem::path& path) {
  DirectHandle handle;
  int fd = open_regular(path, O_DIRECT, handle.size);
  handle.unbuffered = fd >= 0;
  if (fd < 0 && errno == EINVAL) {
    // The file system has no O_DIRECT (tmpfs, some FUSE): read through the page cache instead.
    fd = open_regular(path, 0, handle.size);
  }
  if (fd < 0) throw posix_error(ErrorCode::kIo, "cannot open " + display(path), errno);
  handle.file = fd;
  handle.alignment = page_size();
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) != 0) {
    const std::size_t need = std::max(stx.stx_dio_mem_align, stx.stx_dio_offset_align);
    while (handle.alignment < need) handle.alignment *= 2;
  }
#endif
  if (!handle.unbuffered) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  return handle;
}

void close_direct(const DirectHandle& handle) noexcept {
  if (handle.file != kNoHandle) ::close(fd_of(handle.file));
}

std::size_t read_direct(const DirectHandle& handle, std::uint64_t offset, void* buffer,
                        std::size_t length, const std::filesystem::path& path) {
  std::size_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd_of(handle.file), static_cast<char*>(buffer) + done,
                              length - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw posix_error(ErrorCode::kIo,
                        "reading " + display(path) + " at offset " + std::to_string(offset + done) +
                            " failed",
                        errno);
    }
    if (n == 0) break;  // end of file
    done += static_cast<std::size_t>(n);
    // After a short read O_DIRECT needs the next request aligned again; a short read that is not
    // a multiple of the alignment only happens at the end of the file.
    if (done % handle.alignment != 0) break;
  }
  return done;
}

}  // namespace ferry::io::detail
