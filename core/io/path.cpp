// Path ⇄ UTF-8 text, the same on every platform (wide paths on Windows).
#include <string>

#include "core/io/detail/os_file.h"

namespace ferry::io::detail {

std::string display(const std::filesystem::path& path) {
  const std::u8string text = path.u8string();
  return std::string(text.begin(), text.end());
}

std::filesystem::path path_from_utf8(std::string_view text) {
  return std::filesystem::path(std::u8string(text.begin(), text.end()));
}

}  // namespace ferry::io::detail
