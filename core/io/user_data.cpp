#include "core/io/user_data.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

std::filesystem::path user_data_dir() {
  if (const char* dir = env("FERRY_DATA_DIR")) return detail::path_from_utf8(dir);
#ifdef _WIN32
  if (const char* local = env("LOCALAPPDATA")) return detail::path_from_utf8(local) / "Ferry";
#else
  if (const char* xdg = env("XDG_DATA_HOME")) return std::filesystem::path(xdg) / "Ferry";
  if (const char* home = env("HOME")) {
    return std::filesystem::path(home) / ".local" / "share" / "Ferry";
  }
#endif
  throw Error(ErrorCode::kIo,
              "no per-user data folder: set FERRY_DATA_DIR to a folder Ferry may write to");
}

std::filesystem::path user_data_subdir(const char* name) {
  const std::filesystem::path dir = user_data_dir() / name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Error(ErrorCode::kIo, "cannot create " + detail::display(dir) + ": " + ec.message());
  }
  return dir;
}

}  // namespace ferry::io
