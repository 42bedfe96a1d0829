// The Qwen2 pre-tokenizer (minimax_h3.md §A.1): the regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+ | \s+(?!\S) | \s+
// split "isolated" (every match is a piece), written out by hand as the backtracking engine
// (Oniguruma) evaluates it: at each position the first alternative that matches wins.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace ferry::models::h3 {

// The end offsets of the pieces of `text` (code points), in order; the last is text.size().
std::vector<std::size_t> qwen2_split(std::u32string_view text);

}  // namespace ferry::models::h3
