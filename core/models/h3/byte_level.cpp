#include "core/models/h3/byte_level.h"

namespace ferry::models::h3 {

namespace {

bool stands_for_itself(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_unicode{};
  Tables() {
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) to_unicode[b] = stands_for_itself(b) ? b : next++;
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(std::uint8_t byte) {
  return tables().to_unicode[byte];
}

std::optional<std::uint8_t> unicode_to_byte(char32_t code) {
  if (code < 0x100) {
    if (stands_for_itself(code)) return static_cast<std::uint8_t>(code);
    return std::nullopt;
  }
  // The 68 others are U+0100..U+0143, numbered in byte order.
  if (code >= 0x100 + 68) return std::nullopt;
  unsigned n = code - 0x100;
  for (unsigned b = 0; b < 256; ++b) {
    if (!stands_for_itself(b) && n-- == 0) return static_cast<std::uint8_t>(b);
  }
  return std::nullopt;
}

}  // namespace ferry::models::h3
