// bitsandbytes 4-bit state dicts: the files in tests/data/bnb4/ were written by
// tools/reference/make_bnb4_reference.py (numpy restatement of bitsandbytes' quantize_4bit,
// formats_lora_moe.md §2.6); reference.json lists each weight's quant state. TensorFile groups
// every `<p>.weight` into a kBnb4 [out, in] weight with that state, keeps the side tensors, and
// refuses the malformed files of bad/ with the listed error.
#include "core/io/bnb4.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_file.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

TEST(Bnb4Reference, every_quantized_weight_is_grouped_with_its_state) {
  std::ifstream in(test::data_path("bnb4/reference.json"));
  const nlohmann::json reference = nlohmann::json::parse(in);
  ASSERT_EQ(reference["files"].size(), 4u);
  for (const nlohmann::json& expected : reference["files"]) {
    const std::string name = expected["file"];
    SCOPED_TRACE(name);
    const TensorFile file = TensorFile::open(test::data_path("bnb4/" + name));
    EXPECT_EQ(file.tensors().size(), expected["tensors"].get<std::size_t>());
    std::size_t grouped = 0;
    for (const TensorInfo& t : file.tensors()) {
      if (t.dtype == DType::kBnb4) {
        ++grouped;
        EXPECT_TRUE(expected["weights"].contains(t.name)) << t.name;
      } else {
        EXPECT_EQ(t.bnb4, nullptr) << t.name;
      }
    }
    EXPECT_EQ(grouped, expected["weights"].size());
    for (const auto& [weight, state] : expected["weights"].items()) {
      SCOPED_TRACE(weight);
      const TensorInfo& t = file.at(weight);
      ASSERT_EQ(t.dtype, DType::kBnb4);
      ASSERT_NE(t.bnb4, nullptr);
      const std::vector<std::uint64_t> shape = state["shape"];
      EXPECT_EQ(t.shape, shape);
      EXPECT_EQ(t.bytes, shape[0] * shape[1] / 2);
      EXPECT_EQ(t.bytes, dtype_storage_bytes(DType::kBnb4, t.element_count()));
      const Bnb4Info& info = *t.bnb4;
      EXPECT_EQ(info.quant_type, state["quant_type"].get<std::string>());
      EXPECT_EQ(info.blocksize, state["blocksize"].get<std::int64_t>());
      EXPECT_EQ(info.dtype, DType::kBF16);
      EXPECT_EQ(info.nested, state.contains("nested_offset"));
      EXPECT_EQ(file.at(info.absmax).dtype, info.nested ? DType::kU8 : DType::kF32);
      EXPECT_EQ(file.at(info.quant_map).shape, (std::vector<std::uint64_t>{16}));
      if (info.nested) {
        EXPECT_EQ(info.nested_blocksize, state["nested_blocksize"].get<std::int64_t>());
        EXPECT_EQ(info.nested_offset, state["nested_offset"].get<float>());
        EXPECT_EQ(file.at(info.nested_absmax).dtype, DType::kF32);
        EXPECT_EQ(file.at(info.nested_quant_map).shape, (std::vector<std::uint64_t>{256}));
      } else {
        EXPECT_TRUE(info.nested_absmax.empty());
        EXPECT_TRUE(info.nested_quant_map.empty());
      }
    }
    // The side tensors stay ordinary entries; the unquantized tensor is untouched.
    EXPECT_EQ(file.at("blocks.0.norm3.weight").dtype, DType::kF32);
    EXPECT_EQ(file.at("head.head.weight.quant_map").dtype, DType::kF32);
  }
}

TEST(Bnb4Parse, the_json_diffsynth_writes_is_read_whole) {
  std::uint64_t out = 0;
  std::uint64_t in = 0;
  const Bnb4Info info = parse_bnb4_quant_state(
      R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [96, 640],)"
      R"( "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.05166400969028473})",
      "nf4", "l.weight", "m.safetensors", out, in);
  EXPECT_EQ(out, 96u);
  EXPECT_EQ(in, 640u);
  EXPECT_TRUE(info.nested);
  EXPECT_EQ(info.nested_offset, 0.05166400969028473f);
  EXPECT_EQ(info.absmax, "l.weight.absmax");
  EXPECT_EQ(info.nested_quant_map, "l.weight.nested_quant_map");
}

// Deep nesting within a state's 64 KiB (kMaxBnb4QuantStateBytes; the corpus's state_over_64k
// shows that bound): nlohmann's parser and destructor are iterative, so 30,000 levels, as an
// ignored field, a shape entry or the whole state, end in the state read or a typed refusal, never
// in a deep recursion.
TEST(Bnb4Parse, deep_nesting_in_a_quant_state_is_read_or_refused_without_recursion) {
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  const std::string fields = R"("quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16")";
  std::uint64_t out = 0;
  std::uint64_t in = 0;
  const auto refusal = [&](const std::string& json) -> std::string {
    try {
      parse_bnb4_quant_state(json, "nf4", "l.weight", "m.safetensors", out, in);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
      return e.what();
    }
    ADD_FAILURE() << "accepted";
    return {};
  };
  parse_bnb4_quant_state("{" + fields + R"(, "shape": [96, 640], "extra": )" + deep + "}", "nf4",
                         "l.weight", "m.safetensors", out, in);
  EXPECT_EQ(out, 96u);
  EXPECT_NE(refusal(deep).find("is not a JSON object"), std::string::npos);
  EXPECT_NE(refusal(std::string(100000, '[')).find("is not valid JSON"), std::string::npos);
  EXPECT_NE(
      refusal("{" + fields + R"(, "shape": [)" + deep + ", 640]}").find("not a positive size"),
      std::string::npos);
}

struct CorpusCase {
  std::string file;
  std::string code;
  std::string message;
  std::string why;
};

void PrintTo(const CorpusCase& c, std::ostream* out) {
  *out << c.file;
}

std::vector<CorpusCase> read_manifest() {
  std::ifstream in(test::data_path("bnb4/bad/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<CorpusCase> cases;
  for (const nlohmann::json& c : manifest["cases"]) {
    cases.push_back({c["file"], c["code"], c["message"], c["why"]});
  }
  return cases;
}

class Bnb4Corpus : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(Bnb4Corpus, open_refuses_the_state_dict_with_the_listed_code_and_message) {
  const CorpusCase& c = GetParam();
  SCOPED_TRACE(c.file + " (" + c.why + ")");
  try {
    const TensorFile file = TensorFile::open(test::data_path("bnb4/bad/" + c.file));
    FAIL() << "opened with " << file.tensors().size() << " tensors";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code() == ErrorCode::kUnsupported    ? "kUnsupported"
              : e.code() == ErrorCode::kBadModelFile ? "kBadModelFile"
                                                     : "another code",
              c.code)
        << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << "message: " << message << "\nexpected it to contain: " << c.message;
    EXPECT_NE(message.find(c.file), std::string::npos) << message;
    EXPECT_NE(message.find("'l.weight'"), std::string::npos) << "no weight named: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) {
  std::string name = info.param.file.substr(0, info.param.file.find('.'));
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Bnb4BadFiles, Bnb4Corpus, ::testing::ValuesIn(read_manifest()), case_name);

TEST(Bnb4CorpusManifest, lists_at_least_10_cases_and_every_file_in_the_folder) {
  const std::vector<CorpusCase> cases = read_manifest();
  EXPECT_GE(cases.size(), 10u);
  std::set<std::string> listed;
  for (const CorpusCase& c : cases) listed.insert(c.file);
  std::set<std::string> present;
  for (const auto& entry : std::filesystem::directory_iterator(test::data_path("bnb4/bad"))) {
    if (entry.path().extension() == ".safetensors") {
      present.insert(entry.path().filename().string());
    }
  }
  EXPECT_EQ(listed, present);
}

}  // namespace
}  // namespace ferry::io
