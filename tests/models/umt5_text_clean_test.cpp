// Wan's prompt cleaning against tests/data/umt5/reference.json, which PyPI ftfy and Python's
// html module wrote (tools/reference/make_umt5_tokenizer_reference.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "core/models/umt5/text_clean.h"
#include "tests/test_support.h"

namespace ferry::models::umt5 {
namespace {

const nlohmann::json& reference() {
  static const nlohmann::json json = [] {
    std::ifstream in(test::data_path("umt5/reference.json"), std::ios::binary);
    return nlohmann::json::parse(in);
  }();
  return json;
}

TEST(Umt5TextClean, every_prompt_cleans_as_the_reference_subset_of_ftfy) {
  for (const auto& p : reference()["prompts"]) {
    EXPECT_EQ(clean_prompt(p["raw"].get<std::string>()), p["ferry_clean"].get<std::string>())
        << p["name"];
  }
}

TEST(Umt5TextClean, differs_from_wan_with_ftfy_only_on_the_documented_prompts) {
  // Mojibake repair, NFC, HTML names outside Ferry's table and a third level of escaping are
  // what Ferry leaves out of ftfy and html.unescape.
  const std::set<std::string> expected = {"html_unknown_entity", "html_triple_escaped",
                                          "nfc_decomposed", "mojibake"};
  std::set<std::string> differing;
  for (const auto& p : reference()["prompts"]) {
    if (p["ferry_clean"] != p["wan_clean"]) differing.insert(p["name"].get<std::string>());
  }
  EXPECT_EQ(differing, expected);
}

TEST(Umt5TextClean, wan_cleaning_of_the_negative_prompt_turns_fullwidth_commas_ascii) {
  const std::string negative =
      "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，"
      "低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，"
      "毁容的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走";
  const std::string cleaned = clean_prompt(negative);
  EXPECT_EQ(cleaned.find("，"), std::string::npos);
  EXPECT_EQ(cleaned.substr(0, 16), "色调艳丽,过");
  for (const auto& p : reference()["prompts"]) {
    if (p["name"] == "negative_prompt") {
      EXPECT_EQ(p["raw"].get<std::string>(), negative);
      EXPECT_EQ(cleaned, p["wan_clean"].get<std::string>());
    }
  }
}

TEST(Umt5TextClean, character_fixes_match_ftfy_one_by_one) {
  std::size_t n = 0;
  for (const auto& c : reference()["fix_text"]) {
    EXPECT_EQ(fix_text(c["in"].get<std::string>()), c["out"].get<std::string>()) << c["in"].dump();
    ++n;
  }
  EXPECT_GT(n, 300u);  // every C1 control, ligature, width form, quote and control character
}

TEST(Umt5TextClean, html_unescape_matches_python_for_every_name_it_knows) {
  std::size_t n = 0;
  for (const auto& c : reference()["html"]) {
    EXPECT_EQ(html_unescape(c["in"].get<std::string>()), c["out"].get<std::string>())
        << c["in"].dump();
    ++n;
  }
  EXPECT_GT(n, 800u);
  EXPECT_EQ(html_unescape("&amp; &lt; &gt; &quot; &apos; &nbsp;"), "& < > \" ' \xc2\xa0");
}

TEST(Umt5TextClean, html_names_outside_the_table_stay_as_written) {
  for (const auto& c : reference()["html_unsupported"]) {
    const std::string in = c["in"].get<std::string>();
    EXPECT_EQ(html_unescape(in), c["ferry"].get<std::string>()) << in;
  }
  EXPECT_EQ(html_unescape("&Jscr;"), "&Jscr;");
}

TEST(Umt5TextClean, whitespace_is_what_python_str_isspace_says) {
  std::set<char32_t> python;
  for (const auto& c : reference()["whitespace"])
    python.insert(static_cast<char32_t>(c.get<std::uint32_t>()));
  ASSERT_EQ(python.size(), 29u);
  for (std::uint32_t c = 0; c <= 0x10FFFF; ++c) {
    ASSERT_EQ(is_python_whitespace(c), python.count(c) == 1) << "U+" << std::hex << c;
  }
  EXPECT_EQ(collapse_whitespace(" \t a \u3000\u2003 b\n\n c \x1c"), "a b c");
  EXPECT_EQ(collapse_whitespace("a\u200bb"), "a\u200bb");  // zero-width space is not \s
}

TEST(Umt5TextClean, invalid_utf8_becomes_replacement_characters) {
  EXPECT_EQ(clean_prompt("a\xff"
                         "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(clean_prompt("\xe4\xb8"), "\xef\xbf\xbd\xef\xbf\xbd");  // truncated 3-byte sequence
  EXPECT_EQ(clean_prompt("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong '/'
  EXPECT_EQ(clean_prompt("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
}

TEST(Umt5TextClean, html_is_unescaped_exactly_twice) {
  EXPECT_EQ(clean_prompt("&amp;amp;lt;"), "&lt;");
  EXPECT_EQ(clean_prompt("&amp;lt;"), "<");
}

}  // namespace
}  // namespace ferry::models::umt5
