// The Unicode data the Qwen2 pre-tokenizer and NFC need, generated into unicode_tables.cpp by
// tools/reference/make_h3_tokenizer_reference.py --tables from what the reference itself does
// (that file's header says which Unicode versions). All tables are sorted by their first field.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::models::h3::unicode {

struct CodeRange {
  char32_t first, last;
};
struct ClassRange {
  char32_t first, last;
  std::uint8_t combining_class;
};
// A canonical decomposition, one level deep: `code` -> `first` `second` (0: a singleton).
struct Decomposition {
  char32_t code, first, second;
};
// A primary composite: `first` + `second` -> `code` (Hangul syllables are computed, not listed).
struct Composition {
  char32_t first, second, code;
};

extern const CodeRange kLetterRanges[];
extern const std::size_t kLetterRangesCount;
extern const CodeRange kNumberRanges[];
extern const std::size_t kNumberRangesCount;
extern const char32_t kWhiteSpace[];
extern const std::size_t kWhiteSpaceCount;
extern const ClassRange kCombiningClasses[];
extern const std::size_t kCombiningClassesCount;
extern const Decomposition kDecompositions[];
extern const std::size_t kDecompositionsCount;
extern const Composition kCompositions[];
extern const std::size_t kCompositionsCount;
// The one non-ASCII letter the case-insensitive contraction alternative takes: U+017F LATIN SMALL
// LETTER LONG S folds to 's', so "'ſ" is a contraction.
extern const char32_t kContractionFoldsToS;

}  // namespace ferry::models::h3::unicode
