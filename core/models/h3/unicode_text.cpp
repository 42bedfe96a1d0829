#include "core/models/h3/unicode_text.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/models/h3/unicode_tables.h"

namespace ferry::models::h3 {

namespace {

// Hangul syllables compose and decompose by arithmetic (Unicode §3.12).
constexpr char32_t kHangulS = 0xAC00, kHangulL = 0x1100, kHangulV = 0x1161, kHangulT = 0x11A7;
constexpr char32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr char32_t kHangulNCount = kHangulVCount * kHangulTCount;
constexpr char32_t kHangulSCount = kHangulLCount * kHangulNCount;

bool in_ranges(std::span<const unicode::CodeRange> ranges, char32_t code) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), code,
                             [](char32_t c, const unicode::CodeRange& r) { return c < r.first; });
  return it != ranges.begin() && code <= std::prev(it)->last;
}

const unicode::Decomposition* find_decomposition(char32_t code) {
  const std::span<const unicode::Decomposition> table(unicode::kDecompositions,
                                                      unicode::kDecompositionsCount);
  auto it =
      std::lower_bound(table.begin(), table.end(), code,
                       [](const unicode::Decomposition& d, char32_t c) { return d.code < c; });
  return it != table.end() && it->code == code ? &*it : nullptr;
}

// 0 when `first` + `second` is not a primary composite.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kHangulL && first < kHangulL + kHangulLCount && second >= kHangulV &&
      second < kHangulV + kHangulVCount) {
    return kHangulS + ((first - kHangulL) * kHangulVCount + (second - kHangulV)) * kHangulTCount;
  }
  if (first >= kHangulS && first < kHangulS + kHangulSCount &&
      (first - kHangulS) % kHangulTCount == 0 && second > kHangulT &&
      second < kHangulT + kHangulTCount) {
    return first + (second - kHangulT);
  }
  const std::span<const unicode::Composition> table(unicode::kCompositions,
                                                    unicode::kCompositionsCount);
  auto it = std::lower_bound(table.begin(), table.end(), std::pair{first, second},
                             [](const unicode::Composition& c, std::pair<char32_t, char32_t> key) {
                               return std::pair{c.first, c.second} < key;
                             });
  return it != table.end() && it->first == first && it->second == second ? it->code : 0;
}

void decompose(char32_t code, std::u32string& out) {
  if (code >= kHangulS && code < kHangulS + kHangulSCount) {
    const char32_t index = code - kHangulS;
    out.push_back(kHangulL + index / kHangulNCount);
    out.push_back(kHangulV + (index % kHangulNCount) / kHangulTCount);
    if (index % kHangulTCount != 0) out.push_back(kHangulT + index % kHangulTCount);
    return;
  }
  // Canonical decompositions nest at most four deep; the recursion is bounded by the table.
  if (const unicode::Decomposition* d = find_decomposition(code)) {
    decompose(d->first, out);
    if (d->second != 0) decompose(d->second, out);
    return;
  }
  out.push_back(code);
}

// Stable sort of each run of non-starters by combining class (the canonical ordering).
void reorder(std::u32string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (combining_class(text[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && combining_class(text[j]) != 0) ++j;
    // A stable sort: by class, then by position (std::stable_sort's buffer is deprecated API
    // under clang 19 with libstdc++ 12).
    std::vector<std::pair<std::uint32_t, std::size_t>> marks;
    marks.reserve(j - i);
    for (std::size_t k = i; k < j; ++k) marks.emplace_back(combining_class(text[k]), k);
    std::sort(marks.begin(), marks.end());
    std::u32string sorted;
    sorted.reserve(j - i);
    for (const auto& [cls, k] : marks) sorted.push_back(text[k]);
    std::copy(sorted.begin(), sorted.end(), text.begin() + static_cast<std::ptrdiff_t>(i));
    i = j;
  }
}

// Canonical composition (UAX #15 §1.3): a character joins the last starter unless a character
// between them has a class of 0 or not lower than its own.
void recompose(std::u32string& text) {
  if (text.empty()) return;
  std::size_t starter = 0;
  bool have_starter = combining_class(text[0]) == 0;
  int last_class = have_starter ? 0 : 256;
  std::size_t kept = 1;
  for (std::size_t i = 1; i < text.size(); ++i) {
    const char32_t code = text[i];
    const int cls = combining_class(code);
    const char32_t composite = have_starter ? compose(text[starter], code) : 0;
    if (composite != 0 && (last_class < cls || last_class == 0)) {
      text[starter] = composite;
      continue;
    }
    if (cls == 0) {
      starter = kept;
      have_starter = true;
    }
    last_class = cls;
    text[kept++] = code;
  }
  text.resize(kept);
}

}  // namespace

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = byte(i);
    if (lead < 0x80) {
      out.push_back(lead);
      ++i;
      continue;
    }
    // The well-formed sequences (Unicode Table 3-7): length and the range of the second byte.
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    char32_t code = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
      code = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      code = lead & 0x0F;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      code = lead & 0x07;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    } else {
      out.push_back(kReplacementCharacter);
      ++i;
      continue;
    }
    std::size_t n = 1;
    for (; n < length && i + n < text.size(); ++n) {
      const unsigned char b = byte(i + n);
      const bool ok = n == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      code = (code << 6) | (b & 0x3F);
    }
    if (n == length) {
      out.push_back(code);
    } else {
      out.push_back(kReplacementCharacter);  // the maximal subpart: the lead and the good bytes
    }
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out.push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code >> 6)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) append_utf8(out, c);
  return out;
}

bool is_letter(char32_t code) {
  if (code < 0x80) return (code | 0x20) >= 'a' && (code | 0x20) <= 'z';
  return in_ranges({unicode::kLetterRanges, unicode::kLetterRangesCount}, code);
}

bool is_number(char32_t code) {
  if (code < 0x80) return code >= '0' && code <= '9';
  return in_ranges({unicode::kNumberRanges, unicode::kNumberRangesCount}, code);
}

bool is_space(char32_t code) {
  if (code < 0x80) return code == ' ' || (code >= 0x09 && code <= 0x0D);
  const std::span<const char32_t> table(unicode::kWhiteSpace, unicode::kWhiteSpaceCount);
  return std::binary_search(table.begin(), table.end(), code);
}

std::uint8_t combining_class(char32_t code) {
  if (code < 0x300) return 0;
  const std::span<const unicode::ClassRange> table(unicode::kCombiningClasses,
                                                   unicode::kCombiningClassesCount);
  auto it = std::upper_bound(table.begin(), table.end(), code,
                             [](char32_t c, const unicode::ClassRange& r) { return c < r.first; });
  if (it == table.begin() || code > std::prev(it)->last) return 0;
  return std::prev(it)->combining_class;
}

std::u32string nfc(std::u32string_view text) {
  // Below U+0300 every character is its own NFC with class 0, and nothing composes with it
  // before a later mark: text made only of those (ASCII, Latin-1) is already NFC.
  if (std::all_of(text.begin(), text.end(), [](char32_t c) { return c < 0x300; })) {
    return std::u32string(text);
  }
  std::u32string out;
  out.reserve(text.size() + 8);
  for (char32_t c : text) decompose(c, out);
  reorder(out);
  recompose(out);
  return out;
}

}  // namespace ferry::models::h3
