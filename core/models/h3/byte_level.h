// GPT-2's byte-to-unicode table (minimax_h3.md §A.1, the ByteLevel step): every byte of a
// pre-token is written as one printable character, so that BPE vocabularies are text. The 188
// printable Latin-1 bytes stand for themselves; the other 68 map to U+0100... in byte order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace ferry::models::h3 {

// The character that stands for `byte`.
char32_t byte_to_unicode(std::uint8_t byte);
// The byte a character stands for, or nothing when it is not one of the 256.
std::optional<std::uint8_t> unicode_to_byte(char32_t code);

}  // namespace ferry::models::h3
