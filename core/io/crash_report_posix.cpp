// POSIX crash reports: a signal handler for the fatal signals (on an alternate stack, so a
// stack overflow on the thread that installed it is reported too) and a terminate handler for
// uncaught exceptions. The signal handler uses only async-signal-safe calls (open, write, close,
// time, getpid; glibc's backtrace after a first call made at install time, which loads what it
// needs then).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <system_error>

#include "core/io/crash_report.h"

#if __has_include(<execinfo.h>)
#include <execinfo.h>
#define FERRY_HAVE_BACKTRACE 1
#endif

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

char g_folder[4096];  // where reports go, set before any handler can run
volatile sig_atomic_t g_reporting = 0;

void put(int fd, const char* text) {
  std::size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t written = ::write(fd, text, n);
    if (written <= 0) return;
    text += written;
    n -= static_cast<std::size_t>(written);
  }
}

// Unsigned decimal or hexadecimal, without printf (not async-signal-safe).
void put_number(int fd, std::uintptr_t value, unsigned base) {
  char digits[32];
  int i = sizeof digits;
  digits[--i] = '\0';
  do {
    digits[--i] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && i > 0);
  if (base == 16) put(fd, "0x");
  put(fd, digits + i);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV, invalid memory access";
    case SIGBUS:
      return "SIGBUS, bus error";
    case SIGILL:
      return "SIGILL, illegal instruction";
    case SIGFPE:
      return "SIGFPE, arithmetic error";
    case SIGABRT:
      return "SIGABRT, aborted";
  }
  return "fatal signal";
}

// Opens a new report file; -1 when it cannot.
int open_report() {
  char path[sizeof g_folder + 80];
  const std::size_t folder = std::strlen(g_folder);
  std::memcpy(path, g_folder, folder);
  path[folder] = '/';
  const int stem =
      detail::crash_report_stem(path + folder + 1, static_cast<long long>(std::time(nullptr)),
                                static_cast<long long>(::getpid()));
  std::memcpy(path + folder + 1 + stem, ".txt", 5);
  return ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

void put_backtrace(int fd) {
#ifdef FERRY_HAVE_BACKTRACE
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  put(fd, "backtrace:\n");
  ::backtrace_symbols_fd(frames, n, fd);
#else
  (void)fd;
#endif
}

// The default action for `sig` from here on.
void restore_default(int sig) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  ::sigaction(sig, &action, nullptr);
}

void on_signal(int sig, siginfo_t* info, void*) {
  // A SIGBUS inside a guarded copy out of a mapped model file is not a crash: the guard turns it
  // into an I/O error (os_file.h) and this call does not return. It comes first because the app
  // installs the reporter after its first reads have installed the guard, and we replaced it.
  if (sig == SIGBUS && info != nullptr && info->si_code > 0) {
    detail::resume_guarded_copy(info->si_addr);
  }
  // Raising again after the report ends the process as the signal would have; a fault inside
  // the report goes straight there. Set here rather than by SA_RESETHAND, which would drop the
  // handler at a SIGBUS the guard then recovers from, and would not apply when we are called by
  // a handler installed after ours (the guard's, passing on a SIGBUS that is not its own).
  restore_default(sig);
  if (g_reporting == 0) {
    g_reporting = 1;
    const int fd = open_report();
    if (fd >= 0) {
      put(fd, "Ferry " FERRY_VERSION " crashed: signal ");
      put_number(fd, static_cast<std::uintptr_t>(sig), 10);
      put(fd, " (");
      put(fd, signal_name(sig));
      put(fd, ")");
      if (info != nullptr && info->si_code <= 0) {
        put(fd, ", sent by a process");  // kill(), raise(): no faulting address
      } else if (sig != SIGABRT && info != nullptr) {
        put(fd, " at address ");
        put_number(fd, reinterpret_cast<std::uintptr_t>(info->si_addr), 16);
      }
      put(fd, "\n");
      put_backtrace(fd);
      ::close(fd);
    }
  }
  ::raise(sig);
}

void on_terminate() {
  const std::string what = detail::terminate_reason();
  g_reporting = 1;  // the abort below is this report's, not another
  const int fd = open_report();
  if (fd >= 0) {
    put(fd, "Ferry " FERRY_VERSION " stopped: ");
    put(fd, what.c_str());
    put(fd, "\n");
    put_backtrace(fd);
    ::close(fd);
  }
  ::signal(SIGABRT, SIG_DFL);
  std::abort();
}

}  // namespace

void install_crash_reporter(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) {
    throw Error(ErrorCode::kIo,
                "cannot create the logs folder " + detail::display(folder) + ": " + ec.message());
  }
  const std::string path = folder.string();
  if (path.size() >= sizeof g_folder) {
    throw Error(ErrorCode::kIo, "the logs folder's path is too long: " + detail::display(folder));
  }
  std::memcpy(g_folder, path.c_str(), path.size() + 1);

  static const bool installed = [] {
#ifdef FERRY_HAVE_BACKTRACE
    void* warm[1];
    ::backtrace(warm, 1);  // loads the unwinder now: never for the first time in a handler
#endif
    static std::array<char, 64 * 1024> alternate_stack;
    stack_t stack{};
    stack.ss_sp = alternate_stack.data();
    stack.ss_size = alternate_stack.size();
    ::sigaltstack(&stack, nullptr);
    struct sigaction action {};
    action.sa_sigaction = on_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (const int sig : kFatalSignals) ::sigaction(sig, &action, nullptr);
    std::set_terminate(on_terminate);
    return true;
  }();
  (void)installed;
}

}  // namespace ferry::io
