// The safetensors reader against hostile input: every file of the malformed corpus in
// tests/data/safetensors/bad/ (written by tools/fixtures/make_safetensors_corpus.py, listed with
// its expected error in manifest.json) is refused with that error, and the edge cases a valid
// file may contain are accepted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_file.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

// ---- the manifest ----

struct CorpusCase {
  std::string file;
  std::string code;
  std::string message;
  std::string why;
};

// What ctest and GoogleTest show for a case: its file, not the struct's bytes.
void PrintTo(const CorpusCase& c, std::ostream* out) { *out << c.file; }

// The value of `"key": "..."` on one manifest line. The generator writes ASCII text with no
// escapes but \" and \\; anything else is refused rather than misread.
std::string string_field(std::string_view line, std::string_view key) {
  const std::string open = "\"" + std::string(key) + "\": \"";
  std::size_t i = line.find(open);
  if (i == std::string_view::npos) throw std::runtime_error("no field " + std::string(key));
  std::string value;
  for (i += open.size(); i < line.size() && line[i] != '"'; ++i) {
    if (line[i] == '\\') {
      if (++i == line.size() || (line[i] != '"' && line[i] != '\\')) {
        throw std::runtime_error("unsupported escape in manifest line: " + std::string(line));
      }
    }
    value += line[i];
  }
  if (i == line.size()) throw std::runtime_error("unterminated string: " + std::string(line));
  return value;
}

std::vector<CorpusCase> read_manifest() {
  std::ifstream in(test::data_path("safetensors/bad/manifest.json"));
  std::vector<CorpusCase> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"file\":") == std::string::npos) continue;
    cases.push_back({string_field(line, "file"), string_field(line, "code"),
                     string_field(line, "message"), string_field(line, "why")});
  }
  return cases;
}

std::string code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadArgument:
      return "kBadArgument";
    case ErrorCode::kBadModelFile:
      return "kBadModelFile";
    case ErrorCode::kMissingTensor:
      return "kMissingTensor";
    case ErrorCode::kDoesNotFit:
      return "kDoesNotFit";
    case ErrorCode::kIo:
      return "kIo";
    case ErrorCode::kOutOfMemory:
      return "kOutOfMemory";
    case ErrorCode::kBusy:
      return "kBusy";
    case ErrorCode::kUnsupported:
      return "kUnsupported";
    case ErrorCode::kCancelled:
      return "kCancelled";
    case ErrorCode::kInternal:
      return "kInternal";
  }
  return "unknown";
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= text.size()) return false;
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    constexpr std::uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

// Longest message a corpus file may produce: enough to name the file and the problem, short
// enough for a dialog box.
constexpr std::size_t kMaxMessageBytes = 600;

class SafetensorsCorpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(SafetensorsCorpus, open_refuses_the_file_with_the_listed_code_and_message) {
  const CorpusCase& c = GetParam();
  SCOPED_TRACE(c.file + " (" + c.why + ")");
  const std::filesystem::path path = test::data_path("safetensors/bad/" + c.file);
  ASSERT_TRUE(std::filesystem::exists(path)) << "run tools/fixtures/make_safetensors_corpus.py";
  try {
    const TensorFile file = TensorFile::open(path);
    FAIL() << "opened with " << file.tensors().size() << " tensors";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(code_name(e.code()), c.code) << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << "message: " << message << "\nexpected it to contain: " << c.message;
    EXPECT_NE(message.find(c.file), std::string::npos) << "the message names no file: " << message;
    EXPECT_LE(message.size(), kMaxMessageBytes) << message.substr(0, 2 * kMaxMessageBytes);
    EXPECT_TRUE(is_valid_utf8(message)) << "the message is not valid UTF-8: " << message;
  }
}

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(SafetensorsBadFiles, SafetensorsCorpus,
                         ::testing::ValuesIn(read_manifest()), case_name);

TEST(SafetensorsCorpusManifest, lists_at_least_30_cases_and_every_file_in_the_folder) {
  const std::vector<CorpusCase> cases = read_manifest();
  EXPECT_GE(cases.size(), 30u) << "the corpus shrank; regenerate it with "
                                  "tools/fixtures/make_safetensors_corpus.py";
  std::set<std::string> listed;
  for (const CorpusCase& c : cases) {
    EXPECT_TRUE(listed.insert(c.file).second) << c.file << " is listed twice";
  }
  std::set<std::string> present;
  for (const auto& entry :
       std::filesystem::directory_iterator(test::data_path("safetensors/bad"))) {
    if (entry.path().extension() == ".safetensors")
      present.insert(entry.path().filename().string());
  }
  EXPECT_EQ(listed, present);
}

// ---- in-memory edge cases: what a valid file may contain ----

// A file image: the 8-byte length of `header`, `header`, then `data_bytes` bytes of pattern.
std::vector<std::byte> image(std::string_view header, std::size_t data_bytes) {
  std::vector<std::byte> out(8);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  const std::vector<std::byte> data = test::pattern_bytes(data_bytes, 7);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

SafetensorsHeader parse(std::string_view header, std::size_t data_bytes) {
  const std::vector<std::byte> bytes = image(header, data_bytes);
  return parse_safetensors_header(bytes, bytes.size(), "memory.safetensors");
}

std::vector<std::string> names(const SafetensorsHeader& header) {
  std::vector<std::string> out;
  for (const TensorInfo& t : header.tensors) out.push_back(t.name);
  return out;
}

ErrorCode parse_error_code(std::string_view header, std::size_t data_bytes, std::string* message) {
  try {
    parse(header, data_bytes);
  } catch (const Error& e) {
    *message = e.what();
    return e.code();
  }
  return ErrorCode::kInternal;  // not refused: the caller's EXPECT fails on this
}

TEST(SafetensorsParse, trailing_spaces_after_the_json_are_accepted) {
  // The reference writer pads the header with spaces so the data starts 8-byte aligned.
  const std::string json = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const SafetensorsHeader header = parse(json + "       ", 8);
  ASSERT_EQ(header.tensors.size(), 1u);
  EXPECT_EQ(header.data_offset, 8 + json.size() + 7);
  EXPECT_EQ(header.tensors[0].offset, header.data_offset);
}

TEST(SafetensorsParse, an_empty_object_is_a_file_without_tensors) {
  EXPECT_TRUE(parse("{}", 0).tensors.empty());
  const SafetensorsHeader header = parse(R"({"__metadata__":{}})", 0);
  EXPECT_TRUE(header.tensors.empty());
  EXPECT_TRUE(header.metadata.empty());
}

TEST(SafetensorsParse, zero_size_tensors_are_accepted_anywhere_even_on_another_tensors_bytes) {
  const SafetensorsHeader header = parse(R"({
      "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
      "empty_at_a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},
      "empty_inside_a": {"dtype": "BF16", "shape": [3, 0], "data_offsets": [6, 6]},
      "empty_at_end": {"dtype": "I64", "shape": [0, 5], "data_offsets": [16, 16]}})",
                                         16);
  ASSERT_EQ(header.tensors.size(), 4u);
  // Ties in offset put the empty tensor first.
  EXPECT_EQ(names(header),
            (std::vector<std::string>{"empty_at_a", "a", "empty_inside_a", "empty_at_end"}));
  for (const TensorInfo& t : header.tensors) {
    if (t.name != "a") {
      EXPECT_EQ(t.bytes, 0u) << t.name;
    }
  }
  EXPECT_EQ(header.tensors[2].offset, header.data_offset + 6);
  EXPECT_EQ(header.tensors[2].shape, (std::vector<std::uint64_t>{3, 0}));
}

TEST(SafetensorsParse, a_scalar_has_an_empty_shape_and_one_element) {
  const SafetensorsHeader header =
      parse(R"({"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}})", 8);
  ASSERT_EQ(header.tensors.size(), 1u);
  EXPECT_TRUE(header.tensors[0].shape.empty());
  EXPECT_EQ(header.tensors[0].element_count(), 1u);
  EXPECT_EQ(header.tensors[0].bytes, 8u);
}

TEST(SafetensorsParse, gaps_between_tensors_and_after_the_last_are_accepted) {
  // Ferry is more lenient here than the reference reader, which wants the tensors to tile the
  // data section exactly: unused bytes cannot hurt a reader that only maps declared ranges.
  const SafetensorsHeader header = parse(R"({
      "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
      "b": {"dtype": "U8", "shape": [4], "data_offsets": [12, 16]}})",
                                         24);
  ASSERT_EQ(header.tensors.size(), 2u);
  EXPECT_EQ(header.tensors[0].offset, header.data_offset);
  EXPECT_EQ(header.tensors[1].offset, header.data_offset + 12);
}

TEST(SafetensorsParse, unicode_names_are_accepted_and_escapes_decoded) {
  const SafetensorsHeader header = parse(
      "{\"blocks.0.自注意力.q\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"caf\\u00e9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
      "\"\xf0\x9f\x99\x82\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}",
      3);
  EXPECT_EQ(names(header),
            (std::vector<std::string>{"blocks.0.自注意力.q", "caf\xc3\xa9", "\xf0\x9f\x99\x82"}));
}

TEST(SafetensorsParse, tensors_come_back_in_file_order_not_header_order) {
  const SafetensorsHeader header = parse(R"({
      "z": {"dtype": "U8", "shape": [2], "data_offsets": [4, 6]},
      "y": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
      "x": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}})",
                                         6);
  EXPECT_EQ(names(header), (std::vector<std::string>{"y", "x", "z"}));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(header.tensors[i].offset, header.data_offset + 2 * i);
  }
}

TEST(SafetensorsParse, metadata_is_preserved_exactly) {
  const SafetensorsHeader header = parse(
      R"({"__metadata__": {"format": "pt", "empty": "", "quote": "a \"b\" \\ c",
                           "unicode": "\u00e9t\u00e9", "json": "{\"k\": [1, 2]}"},
          "t": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})",
      1);
  const std::map<std::string, std::string> expected = {{"format", "pt"},
                                                       {"empty", ""},
                                                       {"quote", "a \"b\" \\ c"},
                                                       {"unicode", "\xc3\xa9t\xc3\xa9"},
                                                       {"json", "{\"k\": [1, 2]}"}};
  EXPECT_EQ(header.metadata, expected);
  EXPECT_EQ(header.tensors.size(), 1u);
}

TEST(SafetensorsParse, every_dtype_has_its_size) {
  const std::pair<const char*, std::uint64_t> kSizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"BOOL", 1}};
  for (const auto& [name, size] : kSizes) {
    SCOPED_TRACE(name);
    const std::string header = std::string(R"({"t":{"dtype":")") + name +
                               R"(","shape":[3],"data_offsets":[0,)" + std::to_string(3 * size) +
                               "]}}";
    const SafetensorsHeader parsed = parse(header, 3 * size);
    ASSERT_EQ(parsed.tensors.size(), 1u);
    EXPECT_EQ(dtype_name(parsed.tensors[0].dtype), name);
    EXPECT_EQ(parsed.tensors[0].bytes, 3 * size);
  }
}

TEST(SafetensorsParse, the_length_bound_is_the_reference_implementations) {
  std::byte prefix[8] = {};
  const std::uint64_t n = kMaxSafetensorsHeaderBytes;
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  // Only the length is read here: no 100 MB buffer.
  EXPECT_EQ(safetensors_header_length(prefix, 8 + n, "big.safetensors"), n);
  prefix[0] = static_cast<std::byte>(static_cast<std::uint8_t>(prefix[0]) + 1);
  EXPECT_THROW(safetensors_header_length(prefix, 8 + n + 1, "big.safetensors"), Error);
}

TEST(SafetensorsParse, a_long_hostile_string_gives_a_short_valid_utf8_message) {
  // An unterminated 200 kB name that ends in an invalid byte: the message must neither repeat
  // the whole token nor carry the invalid byte.
  std::string header = "{\"";
  header.append(200'000, 'a');
  header += "\xff";
  std::string message;
  EXPECT_EQ(parse_error_code(header, 0, &message), ErrorCode::kBadModelFile);
  EXPECT_LE(message.size(), kMaxMessageBytes) << message.substr(0, 2 * kMaxMessageBytes);
  EXPECT_TRUE(is_valid_utf8(message)) << message.substr(0, 2 * kMaxMessageBytes);
}

TEST(SafetensorsParse, a_long_unicode_name_is_shortened_on_a_character_boundary) {
  // 'x' and 100 three-byte characters: a cut at byte 120 would fall inside the 40th.
  std::string name = "x";
  for (int i = 0; i < 100; ++i) name += "\xe5\xb1\x82";
  const std::string header =
      "{\"" + name + "\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,1]}}";
  std::string message;
  EXPECT_EQ(parse_error_code(header, 1, &message), ErrorCode::kBadModelFile);
  EXPECT_NE(message.find("unknown dtype"), std::string::npos) << message;
  EXPECT_TRUE(is_valid_utf8(message)) << message;
}

TEST(SafetensorsFileOpen, a_missing_file_is_an_io_error) {
  const test::ScratchDir dir;
  try {
    TensorFile::open(dir / "absent.safetensors");
    FAIL() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo) << e.what();
  }
}

}  // namespace
}  // namespace ferry::io
