// The Unicode text handling the Qwen2 tokenizer needs (minimax_h3.md §A.1): UTF-8 in and out, the
// letter / number / whitespace classes of its pre-tokenizer regex, and NFC, all on the tables in
// unicode_tables.cpp so that Ferry sees text as the reference tokenizer does on every platform.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::models::h3 {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

// UTF-8 to code points. Bytes that are not UTF-8 are read as Python's
// bytes.decode("utf-8", "replace") and Rust's from_utf8_lossy read them: each maximal ill-formed
// subpart (Unicode §3.9, "U+FFFD substitution of maximal subparts") becomes one U+FFFD. Surrogate
// code points and overlong forms are ill-formed.
std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t code);
std::string encode_utf8(std::u32string_view text);

// \p{L}, \p{N} and \s as the reference's regex engine (Oniguruma) matches them.
bool is_letter(char32_t code);
bool is_number(char32_t code);
bool is_space(char32_t code);

std::uint8_t combining_class(char32_t code);
// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical ordering, canonical
// composition, Hangul included.
std::u32string nfc(std::u32string_view text);

}  // namespace ferry::models::h3
