// Wan's prompt cleaning before the umT5 tokenizer (wan.md §A.1, mode 'whitespace'):
//   ftfy.fix_text -> html.unescape twice -> strip -> every run of Unicode whitespace to one
//   space -> strip.
//
// In place of ftfy.fix_text, Ferry runs the fixes of ftfy 6.3 that map characters one by one,
// exactly as ftfy.fix_text(text, fix_encoding=False, unescape_html=False, normalization=None)
// does, repeated until nothing changes: C1 controls read as windows-1252, Latin ligatures split,
// half/full-width forms to standard width, curly quotes straightened, line breaks to "\n",
// terminal colour escapes and stray control characters removed. Left out are the fixes that
// guess: mojibake repair ("cafÃ©" stays as written), ftfy's own HTML unescaping (which repeats
// until stable when the text has no '<', so Wan decodes three or more levels of "&amp;amp;" where
// Ferry decodes two), and NFC (SentencePiece's NFKC runs after this anyway, so ids rarely change).
// tests/models/umt5_text_clean_test.cpp shows each difference against PyPI ftfy.
//
// html.unescape is Python's, with a subset of the HTML5 entity names: all that decode to Latin-1
// text, every name that begins with a semicolon-less legacy name, typographic punctuation, spaces,
// arrows, a few symbols and Greek letters (tools/reference/make_umt5_tokenizer_reference.py
// selects them). Other names stay as written. Numeric references are all decoded, with Python's
// rules for invalid code points.
//
// Text is UTF-8; each byte of an invalid UTF-8 sequence becomes U+FFFD.
#pragma once

#include <string>
#include <string_view>

namespace ferry::models::umt5 {

// The whole cleaning: what Wan's tokenizer sees.
std::string clean_prompt(std::string_view text);

// The steps, for tests.
std::string fix_text(std::string_view text);
std::string html_unescape(std::string_view text);
// strip, whitespace runs to one space, strip.
std::string collapse_whitespace(std::string_view text);
// Python's str.isspace(): what `\s` matches in Wan's regular expression.
bool is_python_whitespace(char32_t c);

}  // namespace ferry::models::umt5
