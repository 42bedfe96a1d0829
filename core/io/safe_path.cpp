// Remote file names to paths that cannot leave their folder (safe_path.h).
#include "core/io/safe_path.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/detail/os_file.h"

namespace ferry::io {
namespace {

// The name as it can be shown in a message: control bytes and long tails would garble it.
std::string quoted(std::string_view name) {
  std::string out = "\"";
  for (const char c : name.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? '?' : c;
  }
  return out + (name.size() > 120 ? "...\"" : "\"");
}

[[noreturn]] void refuse(std::string_view name, const std::string& why) {
  throw Error(ErrorCode::kBadArgument,
              "the file name " + quoted(name) + " from a remote source is refused: " + why);
}

bool is_valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      extra = 1;
      code = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2;
      code = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    if ((extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000) ||
        (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string ascii_upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; });
  return out;
}

// CON, PRN, AUX, NUL, COM0-9, LPT0-9 (and COM/LPT with ¹ ² ³), whatever follows a dot: Windows
// opens the device for "nul.txt" and "COM1.tar.gz" too, and ignores trailing spaces before it.
bool is_windows_device_name(std::string_view component) {
  std::string stem(component.substr(0, component.find('.')));
  while (!stem.empty() && stem.back() == ' ') stem.pop_back();
  const std::string upper = ascii_upper(stem);
  if (upper == "CON" || upper == "PRN" || upper == "AUX" || upper == "NUL" || upper == "CONIN$" ||
      upper == "CONOUT$") {
    return true;
  }
  if (upper.size() < 4) return false;
  const std::string head = upper.substr(0, 3);
  if (head != "COM" && head != "LPT") return false;
  const std::string_view tail = std::string_view(upper).substr(3);
  if (tail.size() == 1 && tail[0] >= '0' && tail[0] <= '9') return true;
  // ¹ ² ³ in UTF-8: Windows treats them as digits here.
  return tail == "\xc2\xb9" || tail == "\xc2\xb2" || tail == "\xc2\xb3";
}

void check_component(std::string_view name, std::string_view component) {
  if (component.empty()) refuse(name, "it has an empty folder name (\"//\" or a trailing '/')");
  if (component == "." || component == "..") {
    refuse(name, "it holds \"" + std::string(component) + "\", which would leave its folder");
  }
  if (component.size() > kMaxRemoteNameBytes) {
    refuse(name, "a name is longer than " + std::to_string(kMaxRemoteNameBytes) + " bytes");
  }
  for (const char c : component) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) refuse(name, "it holds a control character");
    if (c == ':') {
      refuse(name, "it holds ':' (a drive letter or an NTFS alternate data stream)");
    }
    if (std::string_view("<>\"|?*").find(c) != std::string_view::npos) {
      refuse(name, std::string("it holds '") + c + "', which Windows forbids in file names");
    }
  }
  if (component.back() == '.' || component.back() == ' ') {
    refuse(name, "a name ends in a dot or a space, which Windows drops");
  }
  if (is_windows_device_name(component)) {
    refuse(name, "\"" + std::string(component) + "\" is a device name on Windows");
  }
}

std::vector<std::string_view> components(std::string_view name) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '/' || name[i] == '\\') {
      parts.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

}  // namespace

std::filesystem::path safe_relative_path(std::string_view name) {
  if (name.empty()) refuse(name, "it is empty");
  if (name.size() > kMaxRemotePathBytes) {
    refuse(name, "it is longer than " + std::to_string(kMaxRemotePathBytes) + " bytes");
  }
  if (!is_valid_utf8(name)) refuse(name, "it is not valid UTF-8");
  if (name.front() == '/' || name.front() == '\\') {
    refuse(name, "it is an absolute path (it starts with a separator)");
  }
  if (name.size() >= 2 && name[1] == ':') refuse(name, "it starts with a drive letter");
  std::filesystem::path out;
  for (std::string_view component : components(name)) {
    check_component(name, component);
    out /= detail::path_from_utf8(component);
  }
  return out;
}

std::filesystem::path safe_file_name(std::string_view name) {
  if (name.find_first_of("/\\") != std::string_view::npos) {
    refuse(name, "it names a folder, not just a file");
  }
  return safe_relative_path(name);
}

}  // namespace ferry::io
