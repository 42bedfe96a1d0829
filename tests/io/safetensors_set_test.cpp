// Sharded sets: an index that disagrees with its shards, or points outside its folder, is
// refused with kBadModelFile. Each broken set is built at test time in a scratch folder from the
// two good shards of tests/data/safetensors/reference/ and an index written here.
#include "core/io/tensor_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

// The good layout: shard 1 holds embed.weight and blocks.0.attn.q, shard 2 the rest.
constexpr const char* kGoodWeightMap = R"(
    "blocks.0.attn.q": "model-00001-of-00002.safetensors",
    "blocks.1.attn.q": "model-00002-of-00002.safetensors",
    "embed.weight": "model-00001-of-00002.safetensors",
    "head.bias": "model-00002-of-00002.safetensors",
    "head.step": "model-00002-of-00002.safetensors")";

class SafetensorsSetIndex : public ::testing::Test {
 protected:
  SafetensorsSetIndex() {
    std::filesystem::create_directories(dir_ / "model");
    for (const char* shard : {kShard1, kShard2}) {
      std::filesystem::copy_file(test::data_path("safetensors/reference/") / shard,
                                 dir_ / "model" / shard);
    }
  }

  std::filesystem::path index_path() const {
    return dir_ / "model" / "model.safetensors.index.json";
  }
  // Writes the index with `text` and opens it.
  TensorSet open_index(std::string_view text) const {
    test::write_file(index_path(), text);
    return TensorSet::open(index_path());
  }
  TensorSet open_weight_map(std::string_view body) const {
    return open_index(R"({"metadata": {"total_size": 108}, "weight_map": {)" + std::string(body) +
                      "}}");
  }
  // The error opening `text` as the index; fails the test when it opens.
  Error index_error(std::string_view text) const {
    try {
      open_index(text);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "the index opened:\n" << text;
    return Error(ErrorCode::kInternal, "");
  }
  Error weight_map_error(std::string_view body) const {
    return index_error(R"({"metadata": {"total_size": 108}, "weight_map": {)" + std::string(body) +
                       "}}");
  }

  test::ScratchDir dir_;
};

// gtest prints an Error as bytes; say the code and the message instead.
::testing::AssertionResult refused(const Error& e, std::string_view fragment) {
  if (e.code() != ErrorCode::kBadModelFile) {
    return ::testing::AssertionFailure() << "code " << to_string(e.code()) << ": " << e.what();
  }
  if (std::string_view(e.what()).find(fragment) == std::string_view::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << fragment << "': " << e.what();
  }
  return ::testing::AssertionSuccess();
}

TEST_F(SafetensorsSetIndex, the_good_copy_opens) {
  const TensorSet set = open_weight_map(kGoodWeightMap);
  EXPECT_TRUE(set.sharded());
  EXPECT_EQ(set.entries().size(), 5u);
  EXPECT_EQ(set.at("embed.weight").file->path().filename(), kShard1);
  EXPECT_EQ(set.at("head.step").file->path().filename(), kShard2);
}

TEST_F(SafetensorsSetIndex, index_keys_besides_metadata_and_weight_map_are_ignored) {
  const TensorSet set = open_index(R"({"format": "pt", "version": 2, "weight_map": {)" +
                                        std::string(kGoodWeightMap) + "}}");
  EXPECT_EQ(set.entries().size(), 5u);
}

TEST_F(SafetensorsSetIndex, a_missing_shard_is_refused) {
  EXPECT_TRUE(refused(weight_map_error(std::string(kGoodWeightMap) +
                                       R"(, "extra": "model-00003-of-00003.safetensors")"),
                      "is missing"));
}

TEST_F(SafetensorsSetIndex, a_tensor_the_index_puts_in_the_wrong_shard_is_refused) {
  EXPECT_TRUE(refused(weight_map_error(R"(
      "blocks.0.attn.q": "model-00001-of-00002.safetensors",
      "blocks.1.attn.q": "model-00002-of-00002.safetensors",
      "embed.weight": "model-00002-of-00002.safetensors",
      "head.bias": "model-00002-of-00002.safetensors",
      "head.step": "model-00002-of-00002.safetensors")"),
                      "tensor 'embed.weight' is not in its shard model-00002-of-00002"));
}

TEST_F(SafetensorsSetIndex, a_tensor_in_no_shard_is_refused) {
  EXPECT_TRUE(refused(weight_map_error(std::string(kGoodWeightMap) +
                                       R"(, "ghost": "model-00001-of-00002.safetensors")"),
                      "tensor 'ghost' is not in its shard"));
}

TEST_F(SafetensorsSetIndex, a_shard_tensor_the_index_does_not_list_is_refused) {
  EXPECT_TRUE(refused(weight_map_error(R"(
      "blocks.0.attn.q": "model-00001-of-00002.safetensors",
      "blocks.1.attn.q": "model-00002-of-00002.safetensors",
      "embed.weight": "model-00001-of-00002.safetensors",
      "head.step": "model-00002-of-00002.safetensors")"),
                      "tensor 'head.bias' in model-00002-of-00002.safetensors is not listed"));
}

TEST_F(SafetensorsSetIndex, a_tensor_in_two_shards_is_refused) {
  write_safetensors(dir_ / "model" / "model-extra.safetensors",
                    {{"embed.weight", DType::kF32, {4, 3}}}, {},
                    [](std::size_t, std::uint64_t, std::span<std::byte> out) {
                      std::fill(out.begin(), out.end(), std::byte{0});
                    });
  EXPECT_TRUE(refused(
      weight_map_error(std::string(kGoodWeightMap) + R"(, "other": "model-extra.safetensors")"),
      "appears in two files"));
}

TEST_F(SafetensorsSetIndex, shard_paths_outside_the_index_folder_are_refused_even_when_they_exist) {
  // The traversal targets exist: refusal must come from the name, not a missing file.
  std::filesystem::copy_file(test::data_path("safetensors/reference/") / kShard1,
                             dir_ / "escaped.safetensors");
  const std::string absolute = test::data_path("safetensors/reference/").generic_string() + kShard1;
  const std::vector<std::string> names = {
      "../escaped.safetensors",
      "..\\\\escaped.safetensors",
      "./model-00001-of-00002.safetensors",
      "sub/model-00001-of-00002.safetensors",
      absolute,
      "C:\\\\Windows\\\\model.safetensors",
      "C:model.safetensors",
      "\\\\\\\\server\\\\share\\\\model.safetensors",
      "..",
      ".",
      "",
  };
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(refused(weight_map_error(R"("embed.weight": ")" + name + "\""),
                        "is not a .safetensors file name in the index's folder"));
  }
}

TEST_F(SafetensorsSetIndex, shard_names_that_are_not_safetensors_files_are_refused) {
  for (const char* name : {"model.bin", "model.safetensors.index.json", "model.safetensors ",
                           "model\\u0001.safetensors"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(refused(weight_map_error(R"("embed.weight": ")" + std::string(name) + "\""),
                        "is not a .safetensors file name"));
  }
}

TEST_F(SafetensorsSetIndex, a_tensor_listed_twice_is_refused) {
  EXPECT_TRUE(refused(weight_map_error(std::string(kGoodWeightMap) +
                                       R"(, "embed.weight": "model-00001-of-00002.safetensors")"),
                      "tensor 'embed.weight' is listed twice"));
}

TEST_F(SafetensorsSetIndex, a_weight_map_that_is_not_an_object_of_file_names_is_refused) {
  EXPECT_TRUE(refused(index_error(R"({"weight_map": ["model-00001-of-00002.safetensors"]})"),
                      "unexpected array"));
  EXPECT_TRUE(refused(index_error(R"({"weight_map": "model-00001-of-00002.safetensors"})"),
                      "weight_map is not an object"));
  EXPECT_TRUE(refused(index_error(R"({"weight_map": null})"), "weight_map is not an object"));
  EXPECT_TRUE(
      refused(weight_map_error(R"("embed.weight": 1)"), "weight_map values must be file names"));
  EXPECT_TRUE(refused(weight_map_error(R"("embed.weight": {"file": "x.safetensors"})"),
                      "unexpected nested object"));
}

TEST_F(SafetensorsSetIndex, an_index_without_exactly_one_weight_map_is_refused) {
  EXPECT_TRUE(refused(index_error(R"({"metadata": {"total_size": 108}})"), "it has no weight_map"));
  EXPECT_TRUE(
      refused(index_error(R"({"weight_map": {}, "weight_map": {}})"), "two weight_map entries"));
}

TEST_F(SafetensorsSetIndex, an_index_that_is_not_a_json_object_is_refused) {
  EXPECT_TRUE(refused(index_error(""), "not valid JSON"));
  EXPECT_TRUE(refused(index_error(R"({"weight_map": {)"), "not valid JSON"));
  EXPECT_TRUE(refused(index_error("[]"), "unexpected array"));
  EXPECT_TRUE(refused(index_error("\"weight_map\""), "the index is not a JSON object"));
  EXPECT_TRUE(refused(index_error(R"({"weight_map": {}} x)"), "not valid JSON"));
  EXPECT_TRUE(refused(index_error(std::string(R"({"weight_map": {}})") + '\0' + "\xff garbage"),
                      "not valid JSON"));
  EXPECT_TRUE(refused(index_error(R"({"metadata": {"a": {"b": 1}}, "weight_map": {}})"),
                      "unexpected nested object"));
}

// An index from a stranger is bounded: nesting deeper than the index's two levels stops the SAX
// parse at the first extra level (nothing deep is built), and a file over kMaxShardIndexBytes is
// refused from its size, unread (a sparse file here: no 64 MiB written).
TEST_F(SafetensorsSetIndex, a_deeply_nested_or_oversized_index_is_refused_before_it_is_parsed) {
  const std::string deep_arrays = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_TRUE(refused(index_error(deep_arrays), "unexpected array"));
  EXPECT_TRUE(refused(index_error(R"({"weight_map": )" + deep_arrays + "}"), "unexpected array"));
  std::string deep_objects = R"({"metadata": )";
  for (int i = 0; i < 100000; ++i) deep_objects += R"({"a": )";
  deep_objects += "1" + std::string(100000, '}') + "}";
  EXPECT_TRUE(refused(index_error(deep_objects), "unexpected nested object"));

  test::write_file(index_path(), std::string_view("{"));
  std::filesystem::resize_file(index_path(), kMaxShardIndexBytes + 1);
  try {
    TensorSet::open(index_path());
    ADD_FAILURE() << "an index of " << kMaxShardIndexBytes + 1 << " bytes opened";
  } catch (const Error& e) {
    EXPECT_TRUE(refused(e, std::to_string(kMaxShardIndexBytes) + "-byte limit"));
  }
}

TEST_F(SafetensorsSetIndex, a_broken_shard_is_refused) {
  std::filesystem::copy_file(test::data_path("safetensors/bad/offsets_past_end.safetensors"),
                             dir_ / "model" / "broken.safetensors");
  const Error e = weight_map_error(R"("t": "broken.safetensors")");
  EXPECT_TRUE(refused(e, "broken.safetensors"));
  EXPECT_TRUE(refused(e, "ends at data byte 8"));
}

TEST_F(SafetensorsSetIndex, a_long_unicode_shard_name_gives_a_valid_utf8_message) {
  // 'x' and 100 three-byte characters: a message cut at byte 200 would split the 67th.
  std::string name = "x";
  for (int i = 0; i < 100; ++i) name += "\xe5\xb1\x82";
  name += "/model.safetensors";
  const Error e = weight_map_error(R"("embed.weight": ")" + name + "\"");
  ASSERT_TRUE(refused(e, "is not a .safetensors file name"));
  const std::string message = e.what();
  const std::size_t start = message.find("shard '") + 7;
  const std::size_t end = message.find("' is not");
  const std::string shown = message.substr(start, end - start);
  EXPECT_EQ(name.compare(0, shown.size(), shown), 0) << "not a prefix of the name: " << shown;
  EXPECT_LE(shown.size(), 200u);
  EXPECT_NE((static_cast<unsigned char>(name[shown.size()]) & 0xc0), 0x80u)
      << "cut inside a character: " << shown.size() << " bytes shown";
}

TEST(SafetensorsShardIndex, parse_returns_tensor_and_shard_pairs_in_index_order) {
  const auto pairs = parse_shard_index(
      R"({"metadata": {"total_size": 3, "note": null, "ok": true, "f": 1.5},
          "weight_map": {"b": "two.safetensors", "a": "one.safetensors",
                         "c": "two.safetensors"}})",
      "memory.index.json");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"b", "two.safetensors"}, {"a", "one.safetensors"}, {"c", "two.safetensors"}};
  EXPECT_EQ(pairs, expected);
}

}  // namespace
}  // namespace ferry::io
