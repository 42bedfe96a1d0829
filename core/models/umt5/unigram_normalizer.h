// SentencePiece's normalisation of the text before the unigram model sees it (what its
// Normalizer::Normalize does), for a model's normalizer_spec:
//   * user-defined pieces are matched first, longest first, and kept as written;
//   * otherwise the longest prefix the precompiled charsmap knows is replaced by its rule's text
//     (umT5's nmt_nfkc: NFKC plus removal of control characters and folding of odd spaces), or
//     one UTF-8 character is kept (one invalid byte becomes U+FFFD);
//   * with remove_extra_whitespaces, leading, trailing and repeated spaces go;
//   * with add_dummy_prefix, one space is put in front (behind, with treat_whitespace_as_suffix);
//   * with escape_whitespaces, every space becomes U+2581 "▁".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/umt5/piece_trie.h"
#include "core/models/umt5/unigram_model.h"

namespace ferry::models::umt5 {

// A normalizer_spec's precompiled_charsmap: a little-endian uint32 byte size of a darts-clone
// double-array trie, the trie (uint32 units), then the rules' replacement texts, each ended by a
// NUL, that the trie's values point into.
class PrecompiledCharsmap {
 public:
  PrecompiledCharsmap() = default;
  // An empty blob is no charsmap. Throws Error(kBadModelFile) naming `source` when the blob is
  // not laid out as above (header, at least one unit, texts ending with a NUL).
  PrecompiledCharsmap(std::string_view blob, std::string_view source);

  struct Match {
    std::size_t length = 0;  // bytes of the text it replaces; 0: no rule applies
    std::string_view replacement;
  };
  // The longest rule for a prefix of `text` (among the first 32 the trie finds, as SentencePiece
  // looks at no more). Trie walks that leave the array, and values that point outside the texts,
  // end the search: a malformed table never reads out of bounds.
  Match longest_match(std::string_view text) const;

 private:
  std::vector<std::uint32_t> units_;
  std::string replacements_;
};

class UnigramNormalizer {
 public:
  // Throws Error(kBadModelFile) naming `source` when the model's charsmap is malformed.
  UnigramNormalizer(const UnigramModel& model, std::string_view source);

  // UTF-8 text (invalid bytes allowed) to the normalised text the unigram model encodes.
  std::string normalize(std::string_view text) const;

 private:
  struct Prefix {
    std::string_view text;  // what the prefix becomes
    std::size_t consumed;   // bytes of input it stands for (> 0)
  };
  Prefix normalize_prefix(std::string_view text) const;

  PrecompiledCharsmap charsmap_;
  PieceTrie user_defined_;
  bool add_dummy_prefix_;
  bool remove_extra_whitespaces_;
  bool escape_whitespaces_;
  bool treat_whitespace_as_suffix_;
};

// SentencePiece's reading of one UTF-8 character at the start of `text` (not empty): its length
// in bytes, and whether it is valid (overlong forms, surrogates and values past U+10FFFF are not;
// an invalid character is one byte long).
struct Utf8Char {
  std::size_t length;
  bool valid;
};
Utf8Char decode_utf8_char(std::string_view text);

}  // namespace ferry::models::umt5
