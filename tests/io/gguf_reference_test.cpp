// The GGUF reader against the `gguf` package: files in tests/data/gguf/ were written by gguf-py
// 0.19.0's GGUFWriter (tools/reference/make_gguf_reference.py), and reference.json says what its
// GGUFReader reads back from them. Ferry must see the same tensors (type, shape, offset, bytes)
// and key/values; its own writer's files must read back as written.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/gguf.h"
#include "core/io/gguf_writer.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

nlohmann::json read_reference() {
  std::ifstream in(test::data_path("gguf/reference.json"));
  return nlohmann::json::parse(in);
}

std::uint64_t fnv1a64(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) h = (h ^ static_cast<std::uint8_t>(b)) * 0x100000001b3ull;
  return h;
}

// A KV's value as the reference writes it: a number, string, or (nested) list.
nlohmann::json value_json(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kString:
      return v.str;
    case GgufType::kF32:
    case GgufType::kF64:
      return v.f;
    case GgufType::kBool:
      return v.u != 0;
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return v.i;
    case GgufType::kArray: {
      nlohmann::json out = nlohmann::json::array();
      if (v.element_type == GgufType::kString) {
        for (const std::string& s : v.strings) out.push_back(s);
      } else if (v.element_type == GgufType::kArray) {
        for (const GgufValue& item : v.items) out.push_back(value_json(item));
      } else if (v.element_type == GgufType::kF32 || v.element_type == GgufType::kF64) {
        for (double f : v.floats) out.push_back(f);
      } else {
        for (std::int64_t i : v.ints) out.push_back(i);
      }
      return out;
    }
    default:
      return v.u;
  }
}

// The type ids GGUFReader lists for a field: [type] or [kArray, element type, ...].
std::vector<int> types_of(const GgufValue& v) {
  std::vector<int> out{static_cast<int>(v.type)};
  const GgufValue* level = &v;
  while (level->type == GgufType::kArray) {
    out.push_back(static_cast<int>(level->element_type));
    if (level->element_type != GgufType::kArray || level->items.empty()) break;
    level = &level->items.front();
  }
  return out;
}

TEST(GgufReference, every_tensor_and_key_value_matches_the_gguf_package) {
  const nlohmann::json reference = read_reference();
  ASSERT_EQ(reference["files"].size(), 3u);
  for (const nlohmann::json& expected : reference["files"]) {
    const std::string name = expected["file"];
    SCOPED_TRACE(name);
    const TensorFile file = TensorFile::open(test::data_path("gguf/" + name));
    ASSERT_EQ(file.format(), TensorFileFormat::kGguf);
    const GgufHeader& header = *file.gguf();
    EXPECT_EQ(header.version, 3u);
    EXPECT_EQ(header.alignment, expected["alignment"].get<std::uint64_t>());
    EXPECT_EQ(header.data_offset, expected["data_offset"].get<std::uint64_t>());
    EXPECT_EQ(file.data_offset(), header.data_offset);

    ASSERT_EQ(file.tensors().size(), expected["tensors"].size());
    for (std::size_t i = 0; i < file.tensors().size(); ++i) {
      const TensorInfo& t = file.tensors()[i];
      const nlohmann::json& e = expected["tensors"][i];
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, e["name"].get<std::string>());
      EXPECT_EQ(t.dtype, dtype_from_ggml_type(e["ggml_type"].get<std::uint32_t>()));
      EXPECT_EQ(t.offset, e["offset"].get<std::uint64_t>());
      EXPECT_EQ(t.bytes, e["bytes"].get<std::uint64_t>());
      // A comfy.gguf.orig_shape KV reshapes the tensor gguf-py reports flat.
      std::vector<std::uint64_t> shape = e["shape"];
      if (const auto* orig = header.ints("comfy.gguf.orig_shape." + t.name)) {
        shape.assign(orig->begin(), orig->end());
      }
      EXPECT_EQ(t.shape, shape);
      const MappedView view = file.map(t);
      EXPECT_EQ(std::to_string(fnv1a64(view.bytes())), e["fnv1a64"].get<std::string>());
    }

    ASSERT_EQ(header.metadata.size(), expected["kvs"].size());
    for (std::size_t i = 0; i < header.metadata.size(); ++i) {
      const GgufKeyValue& kv = header.metadata[i];
      const nlohmann::json& e = expected["kvs"][i];
      SCOPED_TRACE(kv.key);
      EXPECT_EQ(kv.key, e["key"].get<std::string>());
      EXPECT_EQ(types_of(kv.value), e["types"].get<std::vector<int>>());
      EXPECT_EQ(value_json(kv.value), e["value"]);
    }
  }
}

TEST(GgufReference, the_quirks_of_real_files_are_kept) {
  const TensorFile wan = TensorFile::open(test::data_path("gguf/wan_like_align64.gguf"));
  // city96's 5-D F32 patch embedding and 3-D modulation, shapes in PyTorch order.
  EXPECT_EQ(wan.at("patch_embedding.weight").shape, (std::vector<std::uint64_t>{32, 4, 1, 2, 2}));
  EXPECT_EQ(wan.at("blocks.0.modulation").shape, (std::vector<std::uint64_t>{1, 6, 32}));
  EXPECT_EQ(wan.at("blocks.0.ffn.0.weight").dtype, DType::kQ4_K);
  EXPECT_EQ(wan.at("blocks.0.ffn.0.weight").bytes, 4u * 2 * 144);
  EXPECT_EQ(wan.gguf()->string("general.architecture"), "wan");
  EXPECT_EQ(wan.gguf()->integer("general.alignment"), 64);
  for (const TensorInfo& t : wan.tensors()) EXPECT_EQ(t.offset % 64, 0u) << t.name;

  // sd.cpp-style: prefixed names and no general.architecture.
  const TensorFile prefixed =
      TensorFile::open(test::data_path("gguf/wan_like_prefixed_no_arch.gguf"));
  EXPECT_NE(prefixed.find("model.diffusion_model.head.head.weight"), nullptr);
  EXPECT_EQ(prefixed.gguf()->string("general.architecture"), std::nullopt);
  EXPECT_EQ(prefixed.gguf()->alignment, 32u);

  const TensorFile t5 = TensorFile::open(test::data_path("gguf/t5_like_tokenizer.gguf"));
  const GgufHeader& h = *t5.gguf();
  ASSERT_NE(h.strings("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(h.strings("tokenizer.ggml.tokens")->at(4),
            "\xe2\x96\x81"
            "ferry");
  ASSERT_NE(h.floats("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(h.floats("tokenizer.ggml.scores")->at(4), -7.25);
  ASSERT_NE(h.ints("tokenizer.ggml.token_type"), nullptr);
  EXPECT_EQ(h.ints("tokenizer.ggml.token_type")->at(2), 2);
  EXPECT_EQ(h.integer("tokenizer.ggml.eos_token_id"), 1);
  // The typed lookups say nullopt for another type, not a converted value.
  EXPECT_EQ(h.integer("tokenizer.ggml.model"), std::nullopt);
  EXPECT_EQ(h.strings("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(h.find("no.such.key"), nullptr);
}

TEST(GgufReference, a_tensor_set_opens_a_gguf_file) {
  const TensorSet set = TensorSet::open(test::data_path("gguf/wan_like_align64.gguf"));
  EXPECT_FALSE(set.sharded());
  EXPECT_EQ(set.entries().size(), 15u);
  EXPECT_EQ(set.at("head.head.weight").tensor->dtype, DType::kBF16);
}

// ---- the writer ----

std::vector<TensorSpec> every_dtype() {
  std::vector<TensorSpec> specs;
  const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                          DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
                          DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (DType d : kTypes) {
    specs.push_back({"t." + std::string(dtype_name(d)), d, {3, 512}});
  }
  specs.push_back({"patch", DType::kF32, {5, 4, 1, 2, 2}});
  return specs;
}

TEST(GgufWriter, a_written_file_reads_back_with_every_dtype_kv_and_byte) {
  const test::ScratchDir dir;
  const std::vector<TensorSpec> specs = every_dtype();
  std::vector<GgufKeyValue> metadata = {
      {"general.architecture", gguf_string("wan")},
      {"u8", gguf_uint(GgufType::kU8, 255)},
      {"i16", gguf_int(GgufType::kI16, -32768)},
      {"u64", gguf_uint(GgufType::kU64, 1ull << 60)},
      {"f32", gguf_float(GgufType::kF32, 0.5)},
      {"f64", gguf_float(GgufType::kF64, 1e300)},
      {"flag", gguf_uint(GgufType::kBool, 1)},
      {"names", gguf_string_array({"x", "", "yz"})},
      {"ids", gguf_int_array(GgufType::kI32, {-1, 0, 7})},
      {"scores", gguf_float_array(GgufType::kF32, {0.25, -2})},
      {"grid", gguf_array_array(
                   {gguf_int_array(GgufType::kU16, {1, 2}), gguf_int_array(GgufType::kU16, {})})},
  };
  const auto fill = [](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<std::byte>((index * 31 + offset + i) & 0xff);
    }
  };
  write_gguf(dir / "w.gguf", metadata, specs, fill, {.alignment = 128});
  const TensorFile file = TensorFile::open(dir / "w.gguf");
  const GgufHeader& h = *file.gguf();
  EXPECT_EQ(h.alignment, 128u);
  ASSERT_EQ(h.metadata.size(), metadata.size() + 1);  // + general.alignment
  for (std::size_t i = 0; i < metadata.size(); ++i) {
    EXPECT_EQ(h.metadata[i].key, metadata[i].key);
    EXPECT_EQ(value_json(h.metadata[i].value), value_json(metadata[i].value)) << metadata[i].key;
    EXPECT_EQ(types_of(h.metadata[i].value), types_of(metadata[i].value)) << metadata[i].key;
  }
  ASSERT_EQ(file.tensors().size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorInfo& t = file.tensors()[i];
    SCOPED_TRACE(specs[i].name);
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.dtype, specs[i].dtype);
    EXPECT_EQ(t.shape, specs[i].shape);
    EXPECT_EQ(t.bytes, gguf_tensor_bytes(specs[i]));
    EXPECT_EQ(t.offset % 128, 0u);
    std::vector<std::byte> expected(static_cast<std::size_t>(t.bytes));
    fill(i, 0, expected);
    const MappedView view = file.map(t);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), view.bytes().begin()));
  }
}

TEST(GgufWriter, a_file_without_data_is_a_hole_of_the_full_size) {
  const test::ScratchDir dir;
  // A Q4_K 5120 x 13824 weight (a 14B FFN): 39 MB of data, written without writing it.
  const std::vector<TensorSpec> specs = {{"ffn.0.weight", DType::kQ4_K, {13824, 5120}},
                                         {"norm", DType::kF32, {5120}}};
  write_gguf(dir / "hole.gguf", {}, specs, {});
  const TensorFile file = TensorFile::open(dir / "hole.gguf");
  EXPECT_EQ(file.at("ffn.0.weight").bytes, 13824ull * 20 * 144);
  EXPECT_EQ(file.file_size(), file.at("norm").offset + 5120 * 4);
  EXPECT_FALSE(std::filesystem::exists(dir / "hole.gguf.partial"));
}

TEST(GgufWriter, refuses_what_gguf_cannot_hold) {
  const test::ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] {
              write_gguf(dir / "x.gguf", {}, {{"t", DType::kQ4_K, {2, 100}}}, {});
            }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] {
              write_gguf(dir / "x.gguf", {}, {{"t", DType::kF8E4M3, {2}}}, {});
            }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] {
              write_gguf(dir / "x.gguf", {}, {{"t", DType::kF32, {2}}}, {}, {.alignment = 48});
            }),
            ErrorCode::kBadArgument);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf"));
}

}  // namespace
}  // namespace ferry::io
