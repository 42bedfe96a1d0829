// The GGUF reader against hostile input: every file of the malformed corpus in
// tests/data/gguf/bad/ (written by tools/fixtures/make_gguf_corpus.py, listed with its expected
// error in manifest.json) is refused with that error; every prefix of a valid file is refused
// without a crash; the edge cases a valid file may hold are accepted.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/gguf.h"
#include "core/io/gguf_writer.h"
#include "core/io/tensor_file.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

struct CorpusCase {
  std::string file;
  std::string code;
  std::string message;
  std::string why;
};

void PrintTo(const CorpusCase& c, std::ostream* out) {
  *out << c.file;
}

std::vector<CorpusCase> read_manifest(const std::string& folder) {
  std::ifstream in(test::data_path(folder + "/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<CorpusCase> cases;
  for (const nlohmann::json& c : manifest["cases"]) {
    cases.push_back({c["file"], c["code"], c["message"], c["why"]});
  }
  return cases;
}

std::string code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadModelFile:
      return "kBadModelFile";
    case ErrorCode::kUnsupported:
      return "kUnsupported";
    case ErrorCode::kIo:
      return "kIo";
    default:
      return "another code (" + std::to_string(static_cast<int>(code)) + ")";
  }
}

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

constexpr std::size_t kMaxMessageBytes = 600;

void expect_refused(const std::string& folder, const CorpusCase& c) {
  SCOPED_TRACE(c.file + " (" + c.why + ")");
  const std::filesystem::path path = test::data_path(folder + "/" + c.file);
  ASSERT_TRUE(std::filesystem::exists(path));
  try {
    const TensorFile file = TensorFile::open(path);
    FAIL() << "opened with " << file.tensors().size() << " tensors";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(code_name(e.code()), c.code) << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << "message: " << message << "\nexpected it to contain: " << c.message;
    EXPECT_NE(message.find(c.file), std::string::npos) << "the message names no file: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    EXPECT_LE(message.size(), kMaxMessageBytes) << message.substr(0, 2 * kMaxMessageBytes);
  }
}

class GgufCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(GgufCorpus, open_refuses_the_file_with_the_listed_code_and_message) {
  expect_refused("gguf/bad", GetParam());
}

INSTANTIATE_TEST_SUITE_P(GgufBadFiles, GgufCorpus, ::testing::ValuesIn(read_manifest("gguf/bad")),
                         case_name);

void expect_manifest_lists_the_folder(const std::string& folder, const std::string& extension,
                                      std::size_t at_least) {
  const std::vector<CorpusCase> cases = read_manifest(folder);
  EXPECT_GE(cases.size(), at_least) << "the corpus shrank";
  std::set<std::string> listed;
  for (const CorpusCase& c : cases) EXPECT_TRUE(listed.insert(c.file).second) << c.file;
  std::set<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(test::data_path(folder))) {
    if (entry.path().extension() == extension) present.insert(entry.path().filename().string());
  }
  EXPECT_EQ(listed, present);
}

TEST(GgufCorpusManifest, lists_at_least_40_cases_and_every_file_in_the_folder) {
  expect_manifest_lists_the_folder("gguf/bad", ".gguf", 40);
}

// ---- prefixes of a valid file ----

TEST(GgufParse, every_prefix_of_a_valid_file_is_refused_as_a_bad_file) {
  const std::vector<std::byte> bytes =
      test::read_file(test::data_path("gguf/t5_like_tokenizer.gguf"));
  const GgufHeader whole = parse_gguf_header(bytes, bytes.size(), "t5.gguf");
  const TensorInfo& last = whole.tensors.back();
  ASSERT_EQ(last.offset + last.bytes, bytes.size());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::span<const std::byte> prefix(bytes.data(), n);
    // As a whole (truncated) file, and as the first n bytes of the whole file.
    EXPECT_EQ(test::error_code_of([&] { parse_gguf_header(prefix, n, "t5.gguf"); }),
              ErrorCode::kBadModelFile)
        << n;
    if (n + whole.alignment <= whole.data_offset) {  // inside the tensor infos at the latest
      EXPECT_FALSE(try_parse_gguf_header(prefix, bytes.size(), "t5.gguf").has_value()) << n;
    }
  }
}

// ---- what a valid file may hold ----

std::vector<std::byte> small_file(std::uint32_t version, std::vector<GgufKeyValue> metadata = {}) {
  std::vector<std::byte> bytes =
      gguf_header_bytes(metadata, {{"w", DType::kQ8_0, {2, 64}}, {"n", DType::kF32, {3}}});
  bytes[4] = static_cast<std::byte>(version);
  bytes.resize(bytes.size() + 4 * 34 + 28 + 12 + 20, std::byte{0});
  return bytes;
}

TEST(GgufParse, versions_2_and_3_are_read_alike) {
  for (std::uint32_t version : {2u, 3u}) {
    const std::vector<std::byte> bytes = small_file(version);
    const GgufHeader h = parse_gguf_header(bytes, bytes.size(), "v.gguf");
    EXPECT_EQ(h.version, version);
    ASSERT_EQ(h.tensors.size(), 2u);
    EXPECT_EQ(h.tensors[0].shape, (std::vector<std::uint64_t>{2, 64}));
    EXPECT_EQ(h.tensors[0].bytes, 4u * 34);
    EXPECT_EQ(h.tensors[1].offset, h.data_offset + 160);
  }
}

TEST(GgufParse, arrays_nested_four_deep_and_empty_arrays_are_accepted) {
  GgufValue deep = gguf_int_array(GgufType::kI8, {-1});
  for (int i = 0; i < 3; ++i) deep = gguf_array_array({deep});
  const std::vector<std::byte> bytes =
      small_file(3, {{"deep", deep}, {"none", gguf_string_array({})}});
  const GgufHeader h = parse_gguf_header(bytes, bytes.size(), "deep.gguf");
  const GgufValue* v = h.find("deep");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->items.at(0).items.at(0).items.at(0).ints, (std::vector<std::int64_t>{-1}));
  ASSERT_NE(h.strings("none"), nullptr);
  EXPECT_TRUE(h.strings("none")->empty());
}

TEST(GgufFileOpen, a_header_larger_than_the_first_chunk_is_read_whole) {
  // A tokenizer-sized header: 300 000 strings (about 5 MiB), past the first 1 MiB chunk.
  const test::ScratchDir dir;
  std::vector<std::string> tokens;
  for (int i = 0; i < 300'000; ++i) tokens.push_back("token_" + std::to_string(i));
  write_gguf(dir / "big.gguf", {{"tokenizer.ggml.tokens", gguf_string_array(tokens)}},
             {{"w", DType::kF16, {4, 8}}}, {});
  const TensorFile file = TensorFile::open(dir / "big.gguf");
  EXPECT_GT(file.data_offset(), 4u << 20);
  ASSERT_NE(file.gguf()->strings("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(file.gguf()->strings("tokenizer.ggml.tokens")->back(), "token_299999");
  EXPECT_EQ(file.at("w").bytes, 64u);
}

TEST(GgufFileOpen, a_file_cut_inside_its_data_is_refused_by_the_tensor_it_cuts) {
  const test::ScratchDir dir;
  const std::vector<std::byte> bytes =
      test::read_file(test::data_path("gguf/wan_like_align64.gguf"));
  ASSERT_GT(bytes.size(), 100u);
  test::write_file(dir / "cut.gguf", std::span(bytes).first(bytes.size() - 100));
  std::string message;
  try {
    TensorFile::open(dir / "cut.gguf");
  } catch (const Error& e) {
    message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
  }
  EXPECT_NE(message.find("'head.head.weight' needs data bytes"), std::string::npos) << message;
}

}  // namespace
}  // namespace ferry::io
