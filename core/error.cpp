#include "core/error.h"

#include <cstring>
#include <string>

#ifdef _WIN32
#include <windows.h>
#endif

namespace ferry {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadArgument: return "bad argument";
    case ErrorCode::kBadModelFile: return "bad model file";
    case ErrorCode::kMissingTensor: return "missing tensor";
    case ErrorCode::kDoesNotFit: return "does not fit";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

int exit_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadArgument:
    case ErrorCode::kBadModelFile:
    case ErrorCode::kMissingTensor: return 2;
    case ErrorCode::kDoesNotFit: return 3;
    case ErrorCode::kIo: return 4;
    case ErrorCode::kCancelled: return 130;
    default: return 1;
  }
}

Error posix_error(ErrorCode code, std::string_view what, int err) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return Error(code, std::move(message));
}

#ifdef _WIN32
Error win32_error(ErrorCode code, std::string_view what, unsigned long err) {
  std::string message(what);
  wchar_t* text = nullptr;
  const DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                                     FORMAT_MESSAGE_IGNORE_INSERTS,
                                 nullptr, err, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  message += ": ";
  if (n > 0 && text != nullptr) {
    const int bytes = WideCharToMultiByte(CP_UTF8, 0, text, static_cast<int>(n), nullptr, 0,
                                          nullptr, nullptr);
    std::string utf8(static_cast<std::size_t>(bytes), '\0');
    WideCharToMultiByte(CP_UTF8, 0, text, static_cast<int>(n), utf8.data(), bytes, nullptr,
                        nullptr);
    while (!utf8.empty() && (utf8.back() == '\n' || utf8.back() == '\r' || utf8.back() == ' ' ||
                             utf8.back() == '.')) {
      utf8.pop_back();
    }
    message += utf8;
  } else {
    message += "unknown Windows error";
  }
  if (text != nullptr) LocalFree(text);
  message += " (error " + std::to_string(err) + ")";
  return Error(code, std::move(message));
}
#endif

}  // namespace ferry
