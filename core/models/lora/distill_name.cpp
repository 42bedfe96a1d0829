#include "core/models/lora/distill_name.h"

#include <array>
#include <cctype>
#include <string>
#include <string_view>

namespace ferry::models::lora {
namespace {

std::string lower_ascii(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The step count written as "<N>step", "<N>-step" or "<N>_step" somewhere in `name`, N a whole
// number (not the tail of a longer one); 0 when none is.
int written_steps(std::string_view name) {
  for (std::size_t at = name.find("step"); at != std::string_view::npos;
       at = name.find("step", at + 1)) {
    std::size_t end = at;
    if (end > 0 && (name[end - 1] == '-' || name[end - 1] == '_')) --end;
    std::size_t begin = end;
    while (begin > 0 && is_digit(name[begin - 1])) --begin;
    const std::string_view digits = name.substr(begin, end - begin);
    if (digits == "4") return 4;
    if (digits == "8") return 8;
  }
  return 0;
}

}  // namespace

int distilled_steps(const std::filesystem::path& lora) {
  // UTF-8 bytes: string() would convert to the Windows code page, and may fail there.
  const std::u8string utf8 = lora.filename().u8string();
  const std::string name = lower_ascii(std::string(utf8.begin(), utf8.end()));
  if (const int steps = written_steps(name); steps != 0) return steps;
  constexpr std::array<std::string_view, 4> kMarkers = {"lightx2v", "lightning", "causvid",
                                                        "distill"};
  for (const std::string_view marker : kMarkers) {
    if (name.find(marker) != std::string::npos) return 4;
  }
  return 0;
}

}  // namespace ferry::models::lora
