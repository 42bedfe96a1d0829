// The umT5 tokenizer against tests/data/umt5/reference.json: ids the Python sentencepiece
// package gave for the tiny unigram model in tests/data/umt5/ (trained like umT5's), read both
// from a diffusers tokenizer/ folder and from the `spiece_model` tensor of a single-file
// checkpoint.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/io/safetensors_writer.h"
#include "core/models/umt5/tokenizer.h"
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

const nlohmann::json& prompt(std::string_view name) {
  for (const auto& p : reference()["prompts"]) {
    if (p["name"] == name) return p;
  }
  throw std::runtime_error("no prompt " + std::string(name) + " in the reference");
}

std::vector<std::int32_t> ids_of(const nlohmann::json& p) {
  return p["ids"].get<std::vector<std::int32_t>>();
}

Tokenizer folder_tokenizer() {
  return Tokenizer::from_folder(test::data_path("umt5/tokenizer"));
}

Tokenizer checkpoint_tokenizer() {
  const auto set = io::TensorSet::open(test::data_path("umt5/single_file.safetensors"));
  return Tokenizer::from_checkpoint(set);
}

TEST(Umt5Tokenizer, both_load_paths_give_the_reference_ids_for_every_prompt) {
  const Tokenizer from_folder = folder_tokenizer();
  const Tokenizer from_checkpoint = checkpoint_tokenizer();
  EXPECT_EQ(from_folder.vocab_size(), reference()["vocab_size"].get<std::size_t>());
  EXPECT_EQ(from_checkpoint.vocab_size(), from_folder.vocab_size());
  std::size_t n = 0;
  for (const auto& p : reference()["prompts"]) {
    const std::string raw = p["raw"].get<std::string>();
    const std::vector<std::int32_t> expected = ids_of(p);
    const TokenIds a = from_folder.tokenize(raw);
    const TokenIds b = from_checkpoint.tokenize(raw);
    EXPECT_EQ(a.ids, expected) << p["name"];
    EXPECT_EQ(b.ids, expected) << p["name"];
    EXPECT_EQ(a.text_pieces, p["text_ids"].get<std::size_t>()) << p["name"];
    EXPECT_EQ(a.length(), expected.size()) << p["name"];
    ++n;
  }
  EXPECT_EQ(n, 21u);
}

TEST(Umt5Tokenizer, the_default_negative_prompt_tokenizes_exactly_as_wan) {
  // wan.md §D.4, written out here so that a fixture edit cannot change what is checked.
  const std::string negative =
      "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，"
      "低质量，JPEG压缩残留，丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，"
      "毁容的，形态畸形的肢体，手指融合，静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走";
  const nlohmann::json& p = prompt("negative_prompt");
  const TokenIds t = folder_tokenizer().tokenize(negative);
  EXPECT_EQ(t.ids, ids_of(p));
  EXPECT_EQ(t.ids, p["wan_ids"].get<std::vector<std::int32_t>>());
  EXPECT_EQ(t.ids.back(), kEosId);
  EXPECT_FALSE(t.truncated());
}

TEST(Umt5Tokenizer, long_prompts_keep_511_pieces_and_the_eos) {
  const Tokenizer tok = folder_tokenizer();
  const nlohmann::json& p = prompt("long_english");
  const TokenIds t = tok.tokenize(p["raw"].get<std::string>());
  ASSERT_GT(t.text_pieces, 600u);
  EXPECT_TRUE(t.truncated());
  ASSERT_EQ(t.ids.size(), kMaxTokens);
  EXPECT_EQ(t.ids.back(), kEosId);
  EXPECT_NE(t.ids[kMaxTokens - 2], kEosId);
  EXPECT_EQ(t.ids, ids_of(p));
}

TEST(Umt5Tokenizer, truncation_starts_at_512_pieces) {
  const Tokenizer tok = folder_tokenizer();
  const TokenIds fits = tok.tokenize(prompt("exactly_511_text_ids")["raw"].get<std::string>());
  EXPECT_EQ(fits.text_pieces, 511u);
  EXPECT_FALSE(fits.truncated());
  EXPECT_EQ(fits.length(), kMaxTokens);
  const TokenIds cut = tok.tokenize(prompt("exactly_512_text_ids")["raw"].get<std::string>());
  EXPECT_EQ(cut.text_pieces, 512u);
  EXPECT_TRUE(cut.truncated());
  EXPECT_EQ(cut.length(), kMaxTokens);
  EXPECT_EQ(cut.ids, fits.ids);
}

TEST(Umt5Tokenizer, an_empty_prompt_is_just_the_eos) {
  const Tokenizer tok = folder_tokenizer();
  EXPECT_EQ(tok.tokenize("").ids, std::vector<std::int32_t>{kEosId});
  EXPECT_EQ(tok.tokenize(" \t\n ").ids, std::vector<std::int32_t>{kEosId});
}

TEST(Umt5Tokenizer, encode_skips_the_cleaning) {
  const Tokenizer tok = folder_tokenizer();
  EXPECT_NE(tok.encode("&amp;").ids, tok.tokenize("&amp;").ids);
  EXPECT_EQ(tok.encode("&").ids, tok.tokenize("&amp;").ids);
}

TEST(Umt5Tokenizer, a_pipeline_folder_finds_its_tokenizer_folder) {
  EXPECT_EQ(Tokenizer::from_folder(test::data_path("umt5")).vocab_size(),
            folder_tokenizer().vocab_size());
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Umt5Tokenizer, missing_models_are_bad_model_files_naming_the_path) {
  test::ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] { Tokenizer::from_folder(dir.path()); }),
            ErrorCode::kBadModelFile);
  EXPECT_NE(
      message_of([&] { Tokenizer::from_folder(dir.path()); }).find(dir.path().filename().string()),
      std::string::npos);
  EXPECT_EQ(test::error_code_of([&] { Tokenizer::from_model_file(dir / "nope.model"); }),
            ErrorCode::kBadModelFile);
  EXPECT_NE(message_of([&] { Tokenizer::from_model_file(dir / "nope.model"); }).find("nope.model"),
            std::string::npos);

  // A tokenizer folder with only the fast tokenizer's JSON says so.
  test::write_file(dir / "tokenizer.json", "{}");
  EXPECT_NE(message_of([&] { Tokenizer::from_folder(dir.path()); }).find("tokenizer.json"),
            std::string::npos);
}

TEST(Umt5Tokenizer, corrupt_models_are_bad_model_files) {
  test::ScratchDir dir;
  const std::vector<std::byte> good =
      test::read_file(test::data_path("umt5/tokenizer/spiece.model"));
  const std::vector<std::byte> half(good.begin(), good.begin() + good.size() / 2);
  test::write_file(dir / "half.model", half);
  test::write_file(dir / "text.model", "this is not a protocol buffer");
  test::write_file(dir / "empty.model", "");
  for (const char* name : {"half.model", "text.model", "empty.model"}) {
    EXPECT_EQ(test::error_code_of([&] { Tokenizer::from_model_file(dir / name); }),
              ErrorCode::kBadModelFile)
        << name;
    EXPECT_NE(message_of([&] { Tokenizer::from_model_file(dir / name); }).find(name),
              std::string::npos);
  }
  EXPECT_EQ(test::error_code_of(
                [&] { Tokenizer::from_serialized(test::pattern_bytes(4096), "random bytes"); }),
            ErrorCode::kBadModelFile);
}

TEST(Umt5Tokenizer, models_that_number_eos_or_pad_otherwise_are_refused) {
  const std::vector<std::byte> good =
      test::read_file(test::data_path("umt5/tokenizer/spiece.model"));
  // Protobuf merges an appended trainer_spec (field 2) into the model's: eos_piece (field 47)
  // renamed "<pad>", or pad_piece (field 48) renamed "</s>", moves EOS or pad to another id.
  const std::vector<std::vector<int>> renames = {
      {0x12, 8, 0xFA, 0x02, 5, '<', 'p', 'a', 'd', '>'},
      {0x12, 7, 0x82, 0x03, 4, '<', '/', 's', '>'},
  };
  for (const auto& rename : renames) {
    std::vector<std::byte> model = good;
    for (const int b : rename) model.push_back(static_cast<std::byte>(b));
    EXPECT_EQ(test::error_code_of([&] { Tokenizer::from_serialized(model, "renamed"); }),
              ErrorCode::kBadModelFile);
    EXPECT_NE(message_of([&] { Tokenizer::from_serialized(model, "renamed"); }).find("T5"),
              std::string::npos);
  }
}

void write_checkpoint(const std::filesystem::path& path, const std::vector<io::TensorSpec>& specs,
                      const std::vector<std::byte>& spiece) {
  io::write_safetensors(
      path, specs, {}, [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
        for (std::size_t i = 0; i < out.size(); ++i) {
          out[i] = specs[index].name == "spiece_model" && offset + i < spiece.size()
                       ? spiece[offset + i]
                       : std::byte{0};
        }
      });
}

TEST(Umt5Tokenizer, checkpoints_without_a_byte_vector_spiece_model_are_refused) {
  test::ScratchDir dir;
  const std::vector<std::byte> model =
      test::read_file(test::data_path("umt5/tokenizer/spiece.model"));
  const std::uint64_t n = model.size();

  write_checkpoint(dir / "none.safetensors", {{"shared.weight", DType::kF32, {4, 2}}}, model);
  EXPECT_EQ(test::error_code_of([&] {
              Tokenizer::from_checkpoint(io::TensorSet::open(dir / "none.safetensors"));
            }),
            ErrorCode::kMissingTensor);

  write_checkpoint(dir / "i8.safetensors", {{"spiece_model", DType::kI8, {n}}}, model);
  write_checkpoint(dir / "2d.safetensors", {{"spiece_model", DType::kU8, {1, n}}}, model);
  write_checkpoint(dir / "junk.safetensors", {{"spiece_model", DType::kU8, {64}}}, {});
  write_checkpoint(dir / "good.safetensors", {{"spiece_model", DType::kU8, {n}}}, model);
  for (const char* name : {"i8.safetensors", "2d.safetensors", "junk.safetensors"}) {
    EXPECT_EQ(test::error_code_of(
                  [&] { Tokenizer::from_checkpoint(io::TensorSet::open(dir / name)); }),
              ErrorCode::kBadModelFile)
        << name;
  }
  const Tokenizer tok =
      Tokenizer::from_checkpoint(io::TensorSet::open(dir / "good.safetensors"));
  EXPECT_EQ(tok.tokenize(prompt("mixed")["raw"].get<std::string>()).ids, ids_of(prompt("mixed")));
}

}  // namespace
}  // namespace ferry::models::umt5

