// The safetensors reader against the reference implementation: files in
// tests/data/safetensors/reference/ were written by the official `safetensors` package
// (tools/reference/make_safetensors_reference.py), and reference.json says what that package
// reads back from them. Ferry must read the same dtypes, shapes and bytes, and its writer must
// produce the package's bytes for the same tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "core/io/safetensors_writer.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

// ---- reference.json: one entry a line, written by json.dumps ----

struct RefTensor {
  std::string file;
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::uint64_t nbytes = 0;
  std::uint64_t fnv1a64 = 0;
};

struct RefMetadata {
  std::string file;
  std::string key;
  std::string value;
};

struct Reference {
  std::vector<RefTensor> tensors;
  std::vector<RefMetadata> metadata;
};

// The text after `"key": ` on `line`, or npos.
std::size_t value_start(std::string_view line, std::string_view key) {
  const std::string open = "\"" + std::string(key) + "\": ";
  const std::size_t i = line.find(open);
  return i == std::string_view::npos ? i : i + open.size();
}

// A string value; only \" and \\ escapes (the generator checks it writes no others).
std::string string_field(std::string_view line, std::string_view key) {
  std::size_t i = value_start(line, key);
  if (i == std::string_view::npos || line[i] != '"') {
    throw std::runtime_error("no string " + std::string(key) + " in " + std::string(line));
  }
  std::string value;
  for (++i; i < line.size() && line[i] != '"'; ++i) {
    if (line[i] == '\\' && (++i == line.size() || (line[i] != '"' && line[i] != '\\'))) {
      throw std::runtime_error("unsupported escape in " + std::string(line));
    }
    value += line[i];
  }
  return value;
}

std::uint64_t uint_field(std::string_view line, std::string_view key) {
  const std::size_t i = value_start(line, key);
  if (i == std::string_view::npos) throw std::runtime_error("no number " + std::string(key));
  return std::stoull(std::string(line.substr(i, 24)));
}

std::vector<std::uint64_t> uint_array_field(std::string_view line, std::string_view key) {
  std::size_t i = value_start(line, key);
  if (i == std::string_view::npos || line[i] != '[') {
    throw std::runtime_error("no array " + std::string(key));
  }
  const std::size_t end = line.find(']', i);
  std::vector<std::uint64_t> out;
  for (++i; i < end;) {
    std::size_t used = 0;
    out.push_back(std::stoull(std::string(line.substr(i, end - i)), &used));
    i += used;
    while (i < end && (line[i] == ',' || line[i] == ' ')) ++i;
  }
  return out;
}

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    std::ifstream in(test::data_path("safetensors/reference/reference.json"), std::ios::binary);
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"metadata_key\":") != std::string::npos) {
        r.metadata.push_back({string_field(line, "file"), string_field(line, "metadata_key"),
                              string_field(line, "metadata_value")});
      } else if (line.find("\"name\":") != std::string::npos) {
        r.tensors.push_back({string_field(line, "file"), string_field(line, "name"),
                             string_field(line, "dtype"), uint_array_field(line, "shape"),
                             uint_field(line, "nbytes"),
                             std::stoull(string_field(line, "fnv1a64"), nullptr, 16)});
      }
    }
    return r;
  }();
  return ref;
}

std::filesystem::path reference_path(std::string_view file) {
  return test::data_path("safetensors/reference/" + std::string(file));
}

std::set<std::string> reference_files() {
  std::set<std::string> files;
  for (const RefTensor& t : reference().tensors) files.insert(t.file);
  return files;
}

std::uint64_t fnv1a64(std::span<const std::byte> bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : bytes) {
    h ^= static_cast<std::uint8_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::uint64_t hash_of(const TensorFile& file, const TensorInfo& tensor) {
  const MappedView view = file.map(tensor);
  std::vector<std::byte> bytes(static_cast<std::size_t>(view.size()));
  view.copy_to(0, bytes);
  return fnv1a64(bytes);
}

TEST(SafetensorsReference, the_description_covers_every_committed_file) {
  const Reference& ref = reference();
  EXPECT_GE(ref.tensors.size(), 25u);
  EXPECT_EQ(reference_files(),
            (std::set<std::string>{"single.safetensors", "writer_match.safetensors",
                                   "model-00001-of-00002.safetensors",
                                   "model-00002-of-00002.safetensors"}));
  std::set<std::string> dtypes;
  for (const RefTensor& t : ref.tensors) dtypes.insert(t.dtype);
  EXPECT_EQ(dtypes,
            (std::set<std::string>{"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U8", "BOOL"}));
}

TEST(SafetensorsReference, every_tensor_reads_as_the_official_package_reads_it) {
  for (const std::string& name : reference_files()) {
    SCOPED_TRACE(name);
    const TensorFile file = TensorFile::open(reference_path(name));
    std::size_t described = 0;
    for (const RefTensor& ref : reference().tensors) {
      if (ref.file != name) continue;
      ++described;
      SCOPED_TRACE(ref.name);
      const TensorInfo* t = file.find(ref.name);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(dtype_name(t->dtype), ref.dtype);
      EXPECT_EQ(t->shape, ref.shape);
      EXPECT_EQ(t->bytes, ref.nbytes);
      EXPECT_EQ(t->element_count() * dtype_size(t->dtype), ref.nbytes);
      EXPECT_EQ(hash_of(file, *t), ref.fnv1a64);
    }
    EXPECT_EQ(file.tensors().size(), described) << "tensors the package does not report";
  }
}

TEST(SafetensorsReference, metadata_reads_as_the_official_package_reads_it) {
  for (const std::string& name : reference_files()) {
    SCOPED_TRACE(name);
    std::map<std::string, std::string> expected;
    for (const RefMetadata& m : reference().metadata) {
      if (m.file == name) expected[m.key] = m.value;
    }
    EXPECT_EQ(TensorFile::open(reference_path(name)).metadata(), expected);
  }
  EXPECT_EQ(TensorFile::open(reference_path("single.safetensors")).metadata().at("unicode"),
            "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
}

TEST(SafetensorsReference, the_official_writer_tiles_an_aligned_data_section_in_offset_order) {
  for (const std::string& name : reference_files()) {
    SCOPED_TRACE(name);
    const TensorFile file = TensorFile::open(reference_path(name));
    EXPECT_EQ(file.data_offset() % 8, 0u);
    std::uint64_t next = file.data_offset();
    for (const TensorInfo& t : file.tensors()) {
      EXPECT_EQ(t.offset, next) << t.name;
      next = t.offset + t.bytes;
    }
    EXPECT_EQ(next, file.file_size());
  }
}

TEST(SafetensorsReference, the_sharded_set_gives_every_tensor_from_its_own_shard) {
  const TensorSet set = TensorSet::open(reference_path("model.safetensors.index.json"));
  EXPECT_TRUE(set.sharded());
  ASSERT_EQ(set.files().size(), 2u);
  std::size_t sharded = 0;
  std::uint64_t total = 0;
  for (const RefTensor& ref : reference().tensors) {
    if (ref.file.rfind("model-", 0) != 0) continue;
    ++sharded;
    total += ref.nbytes;
    SCOPED_TRACE(ref.name);
    const TensorSet::Entry& entry = set.at(ref.name);
    EXPECT_EQ(entry.file->path().filename().string(), ref.file);
    EXPECT_EQ(dtype_name(entry.tensor->dtype), ref.dtype);
    EXPECT_EQ(entry.tensor->shape, ref.shape);
    EXPECT_EQ(hash_of(*entry.file, *entry.tensor), ref.fnv1a64);
  }
  EXPECT_EQ(set.entries().size(), sharded);
  EXPECT_EQ(set.tensor_bytes(), total);
  EXPECT_EQ(total, 108u);  // the index's metadata.total_size
  EXPECT_EQ(set.find("single_tensor_name_not_here"), nullptr);
  EXPECT_THROW(set.at("nope"), Error);
}

TEST(SafetensorsReference, a_single_file_opens_as_an_unsharded_set) {
  const TensorSet set = TensorSet::open(reference_path("single.safetensors"));
  EXPECT_FALSE(set.sharded());
  ASSERT_EQ(set.files().size(), 1u);
  EXPECT_EQ(set.entries().size(), set.files()[0].tensors().size());
  EXPECT_NE(set.find("blocks.0.\xe6\xb3\xa8\xe6\x84\x8f\xe5\x8a\x9b.weight"), nullptr);
}

// ---- Ferry's writer ----

// Tensor bytes for the writer: pattern bytes per tensor, served in whatever windows it asks.
struct PatternTensors {
  std::vector<std::vector<std::byte>> bytes;

  explicit PatternTensors(const std::vector<TensorSpec>& specs) {
    for (std::size_t i = 0; i < specs.size(); ++i) {
      bytes.push_back(test::pattern_bytes(static_cast<std::size_t>(specs[i].bytes()),
                                          static_cast<std::uint32_t>(i + 1)));
    }
  }
  TensorFiller filler() const {
    return [this](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
      std::memcpy(out.data(), bytes[index].data() + offset, out.size());
    };
  }
};

TEST(SafetensorsRoundTrip, what_the_writer_writes_reads_back_identically) {
  const test::ScratchDir dir;
  const std::vector<TensorSpec> specs = {
      {"f64", DType::kF64, {3}},
      {"f32.matrix", DType::kF32, {4, 5}},
      {"f16", DType::kF16, {7}},
      {"bf16", DType::kBF16, {2, 3}},
      {"f8_e4m3", DType::kF8E4M3, {5}},
      {"f8_e5m2", DType::kF8E5M2, {5}},
      {"i64.scalar", DType::kI64, {}},
      {"i32", DType::kI32, {2, 2}},
      {"i16", DType::kI16, {3}},
      {"i8", DType::kI8, {9}},
      {"u8.bigger_than_a_write_chunk", DType::kU8, {(8u << 20) + 3}},
      {"bool", DType::kBool, {4}},
      {"empty", DType::kF32, {0, 4}},
      {"\xe5\xb1\x82.0", DType::kF32, {1}},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "\xc3\xa9t\xc3\xa9 \"quoted\""}};
  const PatternTensors data(specs);
  const std::filesystem::path path = dir / "round_trip.safetensors";
  write_safetensors(path, specs, metadata, data.filler());

  const TensorFile file = TensorFile::open(path);
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_EQ(file.data_offset() % 8, 0u);
  ASSERT_EQ(file.tensors().size(), specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE(specs[i].name);
    const TensorInfo& t = file.at(specs[i].name);
    EXPECT_EQ(t.dtype, specs[i].dtype);
    EXPECT_EQ(t.shape, specs[i].shape);
    ASSERT_EQ(t.bytes, specs[i].bytes());
    EXPECT_EQ(&file.tensors()[i], &t) << "not in the order written";
    const MappedView view = file.map(t);
    std::vector<std::byte> read(static_cast<std::size_t>(t.bytes));
    view.copy_to(0, read);
    EXPECT_TRUE(read == data.bytes[i]);
  }
}

TEST(SafetensorsRoundTrip, the_writer_reproduces_the_official_packages_file_byte_for_byte) {
  // Same tensors, same order, same metadata: Ferry's writer must emit exactly the bytes
  // safetensors.numpy.save_file wrote, so the official package reads Ferry's files.
  const std::filesystem::path official = reference_path("writer_match.safetensors");
  const TensorFile source = TensorFile::open(official);
  std::vector<TensorSpec> specs;
  std::vector<std::vector<std::byte>> bytes;
  for (const TensorInfo& t : source.tensors()) {
    specs.push_back({t.name, t.dtype, t.shape});
    const MappedView view = source.map(t);
    bytes.emplace_back(static_cast<std::size_t>(t.bytes));
    view.copy_to(0, bytes.back());
  }
  const test::ScratchDir dir;
  const std::filesystem::path ours = dir / "writer_match.safetensors";
  write_safetensors(ours, specs, source.metadata(),
                    [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
                      std::memcpy(out.data(), bytes[index].data() + offset, out.size());
                    });
  const std::vector<std::byte> expected = test::read_file(official);
  const std::vector<std::byte> written = test::read_file(ours);
  ASSERT_EQ(written.size(), expected.size());
  EXPECT_TRUE(written == expected)
      << "first difference at byte "
      << (std::mismatch(written.begin(), written.end(), expected.begin()).first - written.begin());
}

}  // namespace
}  // namespace ferry::io
