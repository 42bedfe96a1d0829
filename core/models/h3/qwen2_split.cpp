#include "core/models/h3/qwen2_split.h"

#include "core/models/h3/unicode_tables.h"
#include "core/models/h3/unicode_text.h"

namespace ferry::models::h3 {

namespace {

bool is_cr_lf(char32_t c) {
  return c == U'\r' || c == U'\n';
}

// [^\s\p{L}\p{N}]
bool is_other(char32_t c) {
  return !is_space(c) && !is_letter(c) && !is_number(c);
}

// The case-insensitive letter `lower` (ASCII) of the contraction alternative.
bool folds_to(char32_t c, char32_t lower) {
  return c == lower || c == lower - 0x20 || (lower == U's' && c == unicode::kContractionFoldsToS);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at `i`: its length, or 0.
std::size_t contraction(std::u32string_view t, std::size_t i) {
  if (t[i] != U'\'' || i + 1 >= t.size()) return 0;
  const char32_t a = t[i + 1];
  if (folds_to(a, U's') || folds_to(a, U't') || folds_to(a, U'm') || folds_to(a, U'd')) return 2;
  if (i + 2 >= t.size()) return 0;
  const char32_t b = t[i + 2];
  if ((folds_to(a, U'r') || folds_to(a, U'v')) && folds_to(b, U'e')) return 3;
  if (folds_to(a, U'l') && folds_to(b, U'l')) return 3;
  return 0;
}

// The length of the piece that starts at `i` (at least 1).
std::size_t piece_at(std::u32string_view t, std::size_t i) {
  const std::size_t n = t.size();
  if (const std::size_t c = contraction(t, i)) return c;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    std::size_t j = i;
    if (!is_cr_lf(t[j]) && !is_letter(t[j]) && !is_number(t[j]) && j + 1 < n &&
        is_letter(t[j + 1])) {
      ++j;
    }
    if (is_letter(t[j])) {
      while (j < n && is_letter(t[j])) ++j;
      return j - i;
    }
  }
  // \p{N}
  if (is_number(t[i])) return 1;
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  {
    std::size_t j = i;
    if (t[j] == U' ' && j + 1 < n && is_other(t[j + 1])) ++j;
    if (is_other(t[j])) {
      while (j < n && is_other(t[j])) ++j;
      while (j < n && is_cr_lf(t[j])) ++j;
      return j - i;
    }
  }
  // Only whitespace is left at `i`: the run of it decides the three last alternatives.
  std::size_t run_end = i;
  std::size_t last_cr_lf = n;
  while (run_end < n && is_space(t[run_end])) {
    if (is_cr_lf(t[run_end])) last_cr_lf = run_end;
    ++run_end;
  }
  // \s*[\r\n]+: \s* backs off to the last line break of the run, which [\r\n]+ then takes.
  if (last_cr_lf != n) return last_cr_lf + 1 - i;
  const std::size_t run = run_end - i;
  // \s+(?!\S): the whole run at the end of the text, else all but its last space.
  if (run_end == n || run > 1) return run_end == n ? run : run - 1;
  // \s+
  return run;
}

}  // namespace

std::vector<std::size_t> qwen2_split(std::u32string_view text) {
  std::vector<std::size_t> ends;
  std::size_t i = 0;
  while (i < text.size()) {
    i += piece_at(text, i);
    ends.push_back(i);
  }
  return ends;
}

}  // namespace ferry::models::h3
