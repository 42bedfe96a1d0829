#include "core/models/umt5/unigram_normalizer.h"

#include <cstring>
#include <utility>

#include "core/error.h"

namespace ferry::models::umt5 {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";      // U+2581
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD
// SentencePiece keeps the first 32 matches of a charsmap search.
constexpr std::size_t kMaxCharsmapMatches = 32;

// darts-clone's unit layout: bit 8 = a leaf hangs below; bits 0-7 (and bit 31 on leaf units) the
// label; bits 10-31 the offset to the children, shifted by 8 more when bit 9 is set; leaf units
// hold a 31-bit value.
bool has_leaf(std::uint32_t unit) {
  return ((unit >> 8) & 1) == 1;
}
std::uint32_t unit_value(std::uint32_t unit) {
  return unit & ((1u << 31) - 1);
}
std::uint32_t unit_label(std::uint32_t unit) {
  return unit & ((1u << 31) | 0xFF);
}
std::uint32_t unit_offset(std::uint32_t unit) {
  return (unit >> 10) << ((unit & (1u << 9)) >> 6);
}

bool is_trail_byte(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

bool is_valid_codepoint(std::uint32_t c) {
  return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF);
}

}  // namespace

Utf8Char decode_utf8_char(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  if (s[0] < 0x80) return {1, true};
  if (n >= 2 && (s[0] & 0xE0) == 0xC0) {
    const std::uint32_t c = ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    if (is_trail_byte(s[1]) && c >= 0x80) return {2, true};
  } else if (n >= 3 && (s[0] & 0xF0) == 0xE0) {
    const std::uint32_t c = ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    if (is_trail_byte(s[1]) && is_trail_byte(s[2]) && c >= 0x800 && is_valid_codepoint(c)) {
      return {3, true};
    }
  } else if (n >= 4 && (s[0] & 0xF8) == 0xF0) {
    const std::uint32_t c =
        ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    if (is_trail_byte(s[1]) && is_trail_byte(s[2]) && is_trail_byte(s[3]) && c >= 0x10000 &&
        is_valid_codepoint(c)) {
      return {4, true};
    }
  }
  return {1, false};
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, std::string_view source) {
  if (blob.empty()) return;
  auto bad = [&](const std::string& problem) {
    return Error(ErrorCode::kBadModelFile,
                 std::string(source) +
                     ": not a valid SentencePiece model (precompiled_charsmap: " + problem + ")");
  };
  if (blob.size() <= 4) throw bad("shorter than its header");
  std::uint32_t trie_bytes = 0;
  for (int i = 0; i < 4; ++i) {
    trie_bytes |= static_cast<std::uint32_t>(static_cast<unsigned char>(blob[i])) << (8 * i);
  }
  blob.remove_prefix(4);
  if (trie_bytes > blob.size()) {
    throw bad("a trie of " + std::to_string(trie_bytes) + " bytes in " +
              std::to_string(blob.size()));
  }
  if (trie_bytes < 4) throw bad("an empty trie");
  units_.resize(trie_bytes / 4);
  for (std::size_t u = 0; u < units_.size(); ++u) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) {
      v |= static_cast<std::uint32_t>(static_cast<unsigned char>(blob[4 * u + i])) << (8 * i);
    }
    units_[u] = v;
  }
  replacements_ = std::string(blob.substr(trie_bytes));
  // SentencePiece's builder ends every replacement text with a NUL.
  if (!replacements_.empty() && replacements_.back() != '\0') {
    throw bad("replacement texts without their final NUL");
  }
}

PrecompiledCharsmap::Match PrecompiledCharsmap::longest_match(std::string_view text) const {
  Match best;
  if (units_.empty()) return best;
  std::size_t node = unit_offset(units_[0]);
  std::size_t found = 0;
  for (std::size_t i = 0; i < text.size() && found < kMaxCharsmapMatches; ++i) {
    const auto label = static_cast<unsigned char>(text[i]);
    node ^= label;
    if (node >= units_.size()) break;
    const std::uint32_t unit = units_[node];
    if (unit_label(unit) != label) break;
    node ^= unit_offset(unit);
    if (!has_leaf(unit)) continue;
    if (node >= units_.size()) break;
    const std::size_t value = unit_value(units_[node]);
    if (value >= replacements_.size()) break;
    const void* end = std::memchr(replacements_.data() + value, '\0', replacements_.size() - value);
    if (end == nullptr) break;
    best.length = i + 1;
    best.replacement = std::string_view(
        replacements_.data() + value, static_cast<const char*>(end) - replacements_.data() - value);
    ++found;
  }
  return best;
}

UnigramNormalizer::UnigramNormalizer(const UnigramModel& model, std::string_view source)
    : charsmap_(model.precompiled_charsmap, source),
      add_dummy_prefix_(model.add_dummy_prefix),
      remove_extra_whitespaces_(model.remove_extra_whitespaces),
      escape_whitespaces_(model.escape_whitespaces),
      treat_whitespace_as_suffix_(model.treat_whitespace_as_suffix) {
  std::vector<std::pair<std::string_view, std::int32_t>> symbols;
  for (std::size_t i = 0; i < model.pieces.size(); ++i) {
    const UnigramPiece& p = model.pieces[i];
    if (p.type != PieceType::kUserDefined) continue;
    // SentencePiece builds this trie from NUL-terminated strings.
    const std::string_view key(p.text.c_str());
    if (!key.empty()) symbols.emplace_back(key, static_cast<std::int32_t>(i));
  }
  user_defined_ = PieceTrie(std::move(symbols));
}

UnigramNormalizer::Prefix UnigramNormalizer::normalize_prefix(std::string_view text) const {
  std::size_t user_defined = 0;
  user_defined_.for_each_prefix(text,
                                [&](std::size_t length, std::int32_t) { user_defined = length; });
  if (user_defined > 0) return {text.substr(0, user_defined), user_defined};

  const PrecompiledCharsmap::Match rule = charsmap_.longest_match(text);
  if (rule.length > 0) return {rule.replacement, rule.length};

  const Utf8Char c = decode_utf8_char(text);
  // A valid U+FFFD reads as valid too (SentencePiece's IsValidDecodeUTF8).
  if (!c.valid) return {kReplacementChar, 1};
  return {text.substr(0, c.length), c.length};
}

std::string UnigramNormalizer::normalize(std::string_view text) const {
  std::string out;
  if (remove_extra_whitespaces_) {
    while (!text.empty()) {
      const Prefix p = normalize_prefix(text);
      if (p.text != " ") break;
      text.remove_prefix(p.consumed);
    }
  }
  if (text.empty()) return out;
  out.reserve(text.size() * 3);

  const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : " ";
  if (add_dummy_prefix_ && !treat_whitespace_as_suffix_) out += space;

  bool after_space = remove_extra_whitespaces_;
  while (!text.empty()) {
    const Prefix p = normalize_prefix(text);
    std::string_view piece = p.text;
    // After a space, leading spaces go, so runs collapse to one (rule texts may hold spaces too).
    if (after_space) {
      while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    }
    if (!piece.empty()) {
      for (const char c : piece) {
        if (c == ' ') {
          out += space;
        } else {
          out += c;
        }
      }
      after_space = piece.back() == ' ';
    }
    text.remove_prefix(p.consumed);
    if (!remove_extra_whitespaces_) after_space = false;
  }

  if (remove_extra_whitespaces_) {
    std::size_t keep = out.size();
    while (keep >= space.size() && out.compare(keep - space.size(), space.size(), space) == 0) {
      keep -= space.size();
    }
    out.erase(keep);
  }
  if (add_dummy_prefix_ && treat_whitespace_as_suffix_) out += space;
  return out;
}

}  // namespace ferry::models::umt5
