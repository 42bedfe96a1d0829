// ferry::Error — the one exception type the engine throws. A code says what kind of failure it
// is (and so which exit code or GUI message it becomes); the message is written for the user.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ferry {

enum class ErrorCode {
  kBadArgument,    // a caller passed something invalid (CLI argument, API misuse)
  kBadModelFile,   // a model file is malformed, truncated or inconsistent
  kMissingTensor,  // a tensor a model needs is not in its files
  kDoesNotFit,     // the plan does not fit the VRAM / RAM budget
  kIo,             // the OS failed to open, map or read a file
  kOutOfMemory,    // an allocation failed
  kBusy,           // the object is still in use (a file with live views)
  kUnsupported,    // the platform or device cannot do this
  kCancelled,      // the user cancelled
  kInternal,       // a bug: an invariant broke
};

std::string_view to_string(ErrorCode code);

// The process exit code for an error, as architecture.md §7 fixes it.
int exit_code(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// An error from a failed POSIX call: "<what>: <strerror(err)>".
Error posix_error(ErrorCode code, std::string_view what, int err);

#ifdef _WIN32
// An error from a failed Win32 call: "<what>: <FormatMessage(err)> (error N)".
Error win32_error(ErrorCode code, std::string_view what, unsigned long err);
#endif

}  // namespace ferry
