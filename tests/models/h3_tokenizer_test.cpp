// The Qwen2 byte-level BPE tokenizer and H3's presentation against tests/data/h3/tokenizer/
// reference.json: the ids transformers' Qwen2Tokenizer gives for 600+ strings on the small BPE
// model in that folder (trained with Qwen2's pipeline;
// tools/reference/make_h3_tokenizer_reference.py), read from vocab.json + merges.txt, from
// tokenizer.json, and from a tokenizer.json whose merges are "a b" strings. With
// FERRY_QWEN_TOKENIZER_DIR set to a folder holding the real Qwen vocab.json, merges.txt and
// tokenizer_config.json (MiniMax-H3's tokenizer/), the same strings are checked against
// real_reference.json too.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/presentation.h"
#include "core/models/h3/unicode_text.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const nlohmann::json& reference() {
  static const nlohmann::json json =
      nlohmann::json::parse(read_all(test::data_path("h3/tokenizer/reference.json")));
  return json;
}

std::string hex_bytes(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The bytes a case gives the tokenizer (not always UTF-8).
std::string case_text(const nlohmann::json& c) {
  return c.contains("hex") ? hex_bytes(c["hex"].get<std::string>()) : c["text"].get<std::string>();
}

std::string case_label(const nlohmann::json& c) {
  return c.contains("hex") ? "hex " + c["hex"].get<std::string>() : c["text"].dump();
}

std::filesystem::path folder() {
  return test::data_path("h3/tokenizer");
}

// vocab.json + merges.txt + tokenizer_config.json, as a transformers folder without
// tokenizer.json holds them.
BpeTokenizer from_vocab_folder() {
  const std::string vocab = read_all(folder() / "vocab.json");
  const std::string merges = read_all(folder() / "merges.txt");
  const std::string config = read_all(folder() / "tokenizer_config.json");
  return BpeTokenizer::from_vocab_merges({vocab, "vocab.json"}, {merges, "merges.txt"},
                                         TokenizerText{config, "tokenizer_config.json"});
}

BpeTokenizer from_tokenizer_json(const std::string& text) {
  const std::string config = read_all(folder() / "tokenizer_config.json");
  return BpeTokenizer::from_tokenizer_json({text, "tokenizer.json"},
                                           TokenizerText{config, "tokenizer_config.json"});
}

// tokenizer.json with its merges written the older way, "a b".
std::string with_string_merges(const std::string& tokenizer_json) {
  nlohmann::json j = nlohmann::json::parse(tokenizer_json);
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& m : j["model"]["merges"]) {
    merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  j["model"]["merges"] = merges;
  return j.dump();
}

void expect_reference_ids(const BpeTokenizer& tok, std::string_view how) {
  std::size_t n = 0;
  for (const auto& c : reference()["cases"]) {
    EXPECT_EQ(tok.encode(case_text(c)), c["ids"].get<std::vector<std::int32_t>>())
        << how << ": " << case_label(c);
    ++n;
  }
  EXPECT_GE(n, 600u);
}

TEST(H3Tokenizer, vocab_and_merges_give_the_reference_ids_for_every_case) {
  const BpeTokenizer tok = from_vocab_folder();
  EXPECT_EQ(tok.id_count(), reference()["tokenizer_size"].get<std::size_t>());
  expect_reference_ids(tok, "vocab.json + merges.txt");
}

TEST(H3Tokenizer, tokenizer_json_gives_the_reference_ids_with_either_merge_form) {
  const std::string text = read_all(folder() / "tokenizer.json");
  ASSERT_TRUE(nlohmann::json::parse(text)["model"]["merges"][0].is_array());
  expect_reference_ids(from_tokenizer_json(text), "tokenizer.json, [a, b] merges");
  expect_reference_ids(from_tokenizer_json(with_string_merges(text)), "tokenizer.json, \"a b\"");
}

TEST(H3Tokenizer, from_folder_reads_the_folder_or_the_folder_above_it) {
  const BpeTokenizer direct = BpeTokenizer::from_folder(folder());
  test::ScratchDir dir;
  std::filesystem::create_directories(dir / "tokenizer");
  for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"}) {
    std::filesystem::copy_file(folder() / f, dir / "tokenizer" / f);
  }
  const BpeTokenizer above = BpeTokenizer::from_folder(dir.path());
  const std::string prompt = "a cat <d> walking, 猫が歩く";
  EXPECT_EQ(direct.encode(prompt), above.encode(prompt));
  EXPECT_EQ(direct.id_count(), above.id_count());
}

TEST(H3Tokenizer, h3_tokens_follow_the_added_tokens_as_transformers_appends_them) {
  // 26 added tokens after the vocabulary, then <d>, </d>, ... from additional_special_tokens
  // (151643 and 151669 on the real vocabulary).
  const BpeTokenizer tok = from_vocab_folder();
  const auto vocab = reference()["vocab_entries"].get<std::int32_t>();
  EXPECT_EQ(tok.token_id("<|endoftext|>"), vocab);
  EXPECT_EQ(tok.token_id("<|vision_start|>"), vocab + 9);
  EXPECT_EQ(tok.token_id("<|image_pad|>"), vocab + 12);
  EXPECT_EQ(tok.token_id("</think>"), vocab + 25);
  EXPECT_EQ(tok.token_id("<d>"), vocab + 26);
  EXPECT_EQ(tok.token_id("<|caption_end|>"), vocab + 32);
  EXPECT_EQ(tok.id_count(), static_cast<std::size_t>(vocab + 33));
}

TEST(H3Tokenizer, added_tokens_split_out_leftmost_and_longest_before_normalization) {
  const BpeTokenizer tok = from_vocab_folder();
  const std::int32_t d = *tok.token_id("<d>");
  const std::vector<std::int32_t> glued = tok.encode("x<d>y");
  ASSERT_EQ(glued.size(), 3u);
  EXPECT_EQ(glued[1], d);
  // "e<d>" + U+0301: the mark is not composed with the e across the token.
  const std::vector<std::int32_t> mark = tok.encode("e<d>\xcc\x81");
  EXPECT_EQ(mark[1], d);
  EXPECT_EQ(tok.encode("<d><d>"), (std::vector<std::int32_t>{d, d}));
}

TEST(H3Tokenizer, decoding_gives_back_the_normalized_text) {
  const BpeTokenizer tok = from_vocab_folder();
  for (const auto& c : reference()["cases"]) {
    const std::string text = case_text(c);
    const std::string expected = encode_utf8(nfc(decode_utf8(text)));
    const std::vector<std::int32_t> ids = c["ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(tok.decode(ids), expected) << case_label(c);
  }
}

TEST(H3Tokenizer, ill_formed_utf8_is_read_as_replacement_characters) {
  // Maximal subparts (Unicode §3.9): a truncated sequence is one U+FFFD, a bad lead byte one each.
  EXPECT_EQ(decode_utf8("\xe2\x82("), (std::u32string{0xFFFD, U'('}));
  EXPECT_EQ(decode_utf8("\xf0\x9f\x98"), (std::u32string{0xFFFD}));
  EXPECT_EQ(decode_utf8("\xed\xa0\x80"), (std::u32string{0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_utf8("\xc0\xaf"), (std::u32string{0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode_utf8("\xf4\x90\x80\x80"), (std::u32string(4, 0xFFFD)));
  EXPECT_EQ(decode_utf8("\xf0\x9f\x98\x80"), (std::u32string{0x1F600}));
  const BpeTokenizer tok = from_vocab_folder();
  EXPECT_EQ(tok.encode("caf\xe9"), tok.encode("caf\xef\xbf\xbd"));
}

TEST(H3Tokenizer, presentations_match_the_reference_ids_and_tags) {
  const BpeTokenizer tok = from_vocab_folder();
  std::size_t n = 0;
  for (const auto& p : reference()["presentations"]) {
    std::vector<std::size_t> blocks;
    for (const auto& f : p["frames"]) {
      blocks.push_back(vision_token_count(f[0].get<std::size_t>(), f[1].get<std::size_t>()));
    }
    const std::string prompt = p["prompt"].get<std::string>();
    const Presentation got =
        blocks.empty() ? present_text(tok, prompt) : present_with_keyframes(tok, prompt, blocks);
    EXPECT_EQ(got.ids, p["ids"].get<std::vector<std::int32_t>>()) << p["task"];
    EXPECT_EQ(got.tags, p["tags"].get<std::vector<std::uint8_t>>()) << p["task"];
    ++n;
  }
  EXPECT_EQ(n, 5u);
}

TEST(H3Tokenizer, vision_tokens_follow_the_canvas) {
  EXPECT_EQ(vision_token_count(480, 832), 390u);
  EXPECT_EQ(vision_token_count(544, 960), 510u);
  EXPECT_EQ(vision_token_count(768, 1344), 1008u);
  // smart_resize (values from transformers' code): halves round to even, small images grow to
  // 65,536 px, huge ones shrink.
  EXPECT_EQ(smart_resize(48, 80).height, 224u);
  EXPECT_EQ(smart_resize(48, 80).width, 352u);
  EXPECT_EQ(smart_resize(336, 336).height, 320u);  // 10.5 -> 10
  EXPECT_EQ(smart_resize(368, 368).height, 384u);  // 11.5 -> 12
  EXPECT_EQ(smart_resize(8000, 6000).height, 4704u);
  EXPECT_EQ(smart_resize(8000, 6000).width, 3520u);
  EXPECT_EQ(smart_resize(10, 1900).height, 32u);  // rounds to 0 rows, then grows
  EXPECT_EQ(test::error_code_of([] { vision_token_count(10, 2001); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([] { vision_token_count(0, 832); }), ErrorCode::kBadArgument);
}

TEST(H3Tokenizer, a_tokenizer_without_vision_tokens_cannot_present_keyframes) {
  const std::string vocab = read_all(folder() / "vocab.json");
  const std::string merges = read_all(folder() / "merges.txt");
  const BpeTokenizer plain =
      BpeTokenizer::from_vocab_merges({vocab, "vocab.json"}, {merges, "merges.txt"}, std::nullopt);
  const std::size_t blocks[] = {4};
  EXPECT_EQ(test::error_code_of([&] { present_with_keyframes(plain, "x", blocks); }),
            ErrorCode::kBadModelFile);
}

// ---- Refusals: each names the file and says what is wrong.

std::string refusal(const std::function<void()>& load) {
  try {
    load();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "loaded";
  return {};
}

std::string refuse_vocab_merges(const std::string& vocab, const std::string& merges,
                                const std::string& config = "{}") {
  return refusal([&] {
    BpeTokenizer::from_vocab_merges({vocab, "v.json"}, {merges, "m.txt"},
                                    TokenizerText{config, "c.json"});
  });
}

std::string byte_vocab_plus(const std::string& extra) {
  nlohmann::json v = nlohmann::json::parse(read_all(folder() / "vocab.json"));
  nlohmann::json e = nlohmann::json::parse(extra);
  for (const auto& [k, val] : e.items()) v[k] = val;
  return v.dump();
}

TEST(H3Tokenizer, malformed_vocabularies_and_merges_are_refused_by_file) {
  const std::string vocab = read_all(folder() / "vocab.json");
  EXPECT_NE(refuse_vocab_merges("{\"a\": 0}", "").find("v.json: not a byte-level vocabulary"),
            std::string::npos);
  EXPECT_NE(refuse_vocab_merges("[1, 2]", "").find("v.json"), std::string::npos);
  EXPECT_NE(refuse_vocab_merges("{\"a\": ", "").find("not valid JSON"), std::string::npos);
  EXPECT_NE(refuse_vocab_merges(byte_vocab_plus("{\"zzq\": 0}"), "").find("two tokens have id 0"),
            std::string::npos);
  EXPECT_NE(refuse_vocab_merges(byte_vocab_plus("{\"zzq\": -1}"), "").find("out of range"),
            std::string::npos);
  EXPECT_NE(refuse_vocab_merges(byte_vocab_plus("{\"zzq\": 99999999}"), "").find("out of range"),
            std::string::npos);
  EXPECT_NE(refuse_vocab_merges(byte_vocab_plus("{\"zzq\": \"7\"}"), "").find("not an integer"),
            std::string::npos);
  EXPECT_NE(refuse_vocab_merges(vocab, "#version: 0.2\nq qqqq\n").find("m.txt: merge 2"),
            std::string::npos);
  EXPECT_NE(refuse_vocab_merges(vocab, "a b c\n").find("m.txt: line 1"), std::string::npos);
  EXPECT_NE(refuse_vocab_merges(vocab, "Ġ t\nĠ t\n").find("repeats"), std::string::npos);
  EXPECT_NE(refuse_vocab_merges(std::string(20000, '['), "").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(
      refuse_vocab_merges(
          vocab, "", R"({"added_tokens_decoder": {"5000": {"content": "<x>", "lstrip": true}}})")
          .find("c.json: added token 5000"),
      std::string::npos);
  EXPECT_NE(refuse_vocab_merges(vocab, "", R"({"added_tokens_decoder": {"x": {"content": "<x>"}}})")
                .find("not an id"),
            std::string::npos);
  EXPECT_NE(
      refuse_vocab_merges(vocab, "", R"({"add_prefix_space": true})").find("add_prefix_space"),
      std::string::npos);
  EXPECT_NE(refuse_vocab_merges(vocab, "",
                                R"({"added_tokens_decoder": {"5000": {"content": "<x>"},
                                    "5001": {"content": "<x>"}}})")
                .find("has two ids"),
            std::string::npos);
}

TEST(H3Tokenizer, a_tokenizer_json_of_another_pipeline_is_refused) {
  const nlohmann::json good = nlohmann::json::parse(read_all(folder() / "tokenizer.json"));
  const auto refuse = [](const nlohmann::json& j) {
    const std::string text = j.dump();
    return refusal([&] { BpeTokenizer::from_tokenizer_json({text, "t.json"}, std::nullopt); });
  };
  nlohmann::json j = good;
  j["normalizer"] = nullptr;
  EXPECT_NE(refuse(j).find("t.json: the normalizer is not NFC"), std::string::npos);
  j = good;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+";
  EXPECT_NE(refuse(j).find("pre-tokenizer"), std::string::npos);
  j = good;
  j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  EXPECT_NE(refuse(j).find("pre-tokenizer"), std::string::npos);
  j = good;
  j["model"]["byte_fallback"] = true;
  EXPECT_NE(refuse(j).find("byte fallback"), std::string::npos);
  j = good;
  j["model"]["merges"][3] = nlohmann::json::array({"a"});
  EXPECT_NE(refuse(j).find("merge 4 is not two tokens"), std::string::npos);
  j = good;
  j["added_tokens"][0]["id"] = 1;
  EXPECT_NE(refuse(j).find("which another token has"), std::string::npos);
}

// Tokenizer files from a stranger are bounded: JSON nesting deeper than kMaxJsonDepth (closed or
// not, in tokenizer.json or its config) is refused while parsing, and a file over
// kMaxTokenizerFileBytes is refused from its size, unread (sparse files here: nothing written).
TEST(H3Tokenizer, tokenizer_files_nested_too_deeply_or_too_large_are_refused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string tokenizer_json = read_all(folder() / "tokenizer.json");
  EXPECT_NE(refusal([&] {
              BpeTokenizer::from_tokenizer_json({deep, "t.json"}, std::nullopt);
            }).find("t.json: JSON nested too deeply"),
            std::string::npos);
  std::string open_objects;  // {"a": {"a": ... never closed
  for (int i = 0; i < 100000; ++i) open_objects += R"({"a": )";
  const std::string config_refusal = refusal([&] {
    BpeTokenizer::from_tokenizer_json({tokenizer_json, "t.json"},
                                      TokenizerText{open_objects, "c.json"});
  });
  EXPECT_NE(config_refusal.find("c.json: JSON nested too deeply"), std::string::npos)
      << config_refusal;
  EXPECT_NE(refuse_vocab_merges(deep, "").find("v.json: JSON nested too deeply"),
            std::string::npos);

  for (const char* file : {"tokenizer.json", "merges.txt"}) {
    SCOPED_TRACE(file);
    test::ScratchDir dir;
    std::filesystem::copy_file(folder() / "vocab.json", dir / "vocab.json");
    test::write_file(dir / file, std::string_view("{"));
    std::filesystem::resize_file(dir / file, kMaxTokenizerFileBytes + 1);
    if (std::string(file) == "merges.txt") {
      // Found beside vocab.json only when there is no tokenizer.json.
      ASSERT_FALSE(std::filesystem::exists(dir / "tokenizer.json"));
    }
    const std::string message = refusal([&] { BpeTokenizer::from_folder(dir.path()); });
    EXPECT_NE(message.find(file), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(kMaxTokenizerFileBytes + 1) +
                           " bytes, too large for a tokenizer file"),
              std::string::npos)
        << message;
  }
}

TEST(H3Tokenizer, a_folder_without_tokenizer_files_is_refused_by_name) {
  test::ScratchDir dir;
  EXPECT_NE(refusal([&] { BpeTokenizer::from_folder(dir.path()); }).find("no tokenizer.json"),
            std::string::npos);
  std::filesystem::copy_file(folder() / "vocab.json", dir / "vocab.json");
  EXPECT_NE(refusal([&] { BpeTokenizer::from_folder(dir.path()); }).find("has no merges.txt"),
            std::string::npos);
}

// ---- The real Qwen vocabulary, when a folder with it is named.

TEST(H3Tokenizer, the_real_qwen_vocabulary_gives_the_reference_ids) {
  const char* dir = std::getenv("FERRY_QWEN_TOKENIZER_DIR");
  if (dir == nullptr || *dir == '\0') {
    GTEST_SKIP() << "FERRY_QWEN_TOKENIZER_DIR is not set: point it at a folder with Qwen's "
                    "vocab.json, merges.txt and tokenizer_config.json (MiniMax-H3's tokenizer/)";
  }
  const nlohmann::json real =
      nlohmann::json::parse(read_all(test::data_path("h3/tokenizer/real_reference.json")));
  const BpeTokenizer tok = BpeTokenizer::from_folder(dir);
  EXPECT_EQ(tok.id_count(), real["tokenizer_size"].get<std::size_t>());
  EXPECT_EQ(tok.token_id("<d>"), 151669);
  EXPECT_EQ(tok.token_id("<|vision_start|>"), 151652);
  EXPECT_EQ(tok.encode("a cat <d> walking"),
            (std::vector<std::int32_t>{64, 8251, 220, 151669, 11435}));
  const auto& cases = reference()["cases"];
  ASSERT_EQ(cases.size(), real["cases"].size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(tok.encode(case_text(cases[i])),
              real["cases"][i]["ids"].get<std::vector<std::int32_t>>())
        << case_label(cases[i]);
  }
  for (const auto& p : real["presentations"]) {
    std::vector<std::size_t> blocks;
    for (const auto& f : p["frames"]) {
      blocks.push_back(vision_token_count(f[0].get<std::size_t>(), f[1].get<std::size_t>()));
    }
    const std::string prompt = p["prompt"].get<std::string>();
    const Presentation got =
        blocks.empty() ? present_text(tok, prompt) : present_with_keyframes(tok, prompt, blocks);
    EXPECT_EQ(got.ids, p["ids"].get<std::vector<std::int32_t>>()) << p["task"];
    EXPECT_EQ(got.tags, p["tags"].get<std::vector<std::uint8_t>>()) << p["task"];
  }
}

}  // namespace
}  // namespace ferry::models::h3
