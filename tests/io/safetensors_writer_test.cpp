// write_safetensors publishes a file only when it is complete: a failure leaves nothing behind.
// Tensors left as holes read as zeros, give the file its full size and take no disk.
#include "core/io/safetensors_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#ifndef _WIN32
#include <sys/stat.h>
#endif

#include "core/error.h"
#include "core/io/tensor_file.h"
#include "tests/test_support.h"

namespace ferry::io {
namespace {

const std::vector<TensorSpec> kTensors = {{"a", DType::kF32, {4, 3}}, {"b", DType::kBF16, {5}}};

void fill_with(std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(index * 31 + offset + i);
  }
}

TEST(SafetensorsWriter, a_failing_filler_leaves_no_file_and_no_partial_file) {
  test::ScratchDir dir;
  const auto path = dir / "model.safetensors";
  EXPECT_THROW(write_safetensors(path, kTensors, {},
                                 [](std::size_t index, std::uint64_t, std::span<std::byte>) {
                                   if (index == 1) throw Error(ErrorCode::kCancelled, "stop");
                                 }),
               Error);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsWriter, an_unwritable_folder_is_an_io_error) {
  test::ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] {
              write_safetensors(dir / "missing-folder" / "m.safetensors", kTensors, {}, fill_with);
            }),
            ErrorCode::kIo);
}

TEST(SafetensorsWriter, rewriting_replaces_the_old_file_whole) {
  test::ScratchDir dir;
  const auto path = dir / "model.safetensors";
  test::write_file(path, std::string_view("an older, different file"));
  write_safetensors(path, kTensors, {{"k", "v"}}, fill_with);
  const TensorFile file = TensorFile::open(path);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.data_offset() % 8, 0u);
  EXPECT_EQ(file.metadata().at("k"), "v");
  std::vector<std::byte> b(10);
  file.map(file.at("b")).copy_to(0, b);
  std::vector<std::byte> expected(10);
  fill_with(1, 0, expected);
  EXPECT_EQ(b, expected);
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.partial"));
}

#ifndef _WIN32
// Bytes the file system allocated for `path` (POSIX st_blocks; Windows' lane does not check it);
// the apparent size where stat fails.
std::uint64_t allocated_bytes(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return static_cast<std::uint64_t>(st.st_blocks) * 512;
  return std::filesystem::file_size(path);
}
#endif

std::vector<std::byte> tensor_bytes(const TensorFile& file, const std::string& name) {
  const TensorInfo& t = file.at(name);
  std::vector<std::byte> out(static_cast<std::size_t>(t.bytes));
  file.map(t).copy_to(0, out);
  return out;
}

TEST(SafetensorsWriter, holes_read_as_zeros_take_their_full_size_and_are_never_filled) {
  test::ScratchDir dir;
  const auto path = dir / "sparse.safetensors";
  constexpr std::uint64_t kBig = std::uint64_t{64} << 20;
  // Holes in the middle and at the end (the end is never written, only sized).
  const std::vector<TensorSpec> tensors = {{"a", DType::kF32, {4, 3}},
                                           {"big", DType::kU8, {kBig}},
                                           {"c", DType::kF32, {2}},
                                           {"tail", DType::kBF16, {kBig / 2}}};
  std::set<std::size_t> filled;
  write_safetensors(
      path, tensors, {},
      [&](std::size_t index, std::uint64_t offset, std::span<std::byte> out) {
        filled.insert(index);
        fill_with(index, offset, out);
      },
      [](std::size_t index) { return index == 1 || index == 3; });
  EXPECT_EQ(filled, (std::set<std::size_t>{0, 2}));

  const TensorFile file = TensorFile::open(path);
  std::uint64_t data = 0;
  for (const TensorSpec& t : tensors) data += t.bytes();
  EXPECT_EQ(std::filesystem::file_size(path), file.data_offset() + data);
  for (const auto& [index, name] : {std::pair<std::size_t, std::string>{0, "a"}, {2, "c"}}) {
    std::vector<std::byte> expected(static_cast<std::size_t>(tensors[index].bytes()));
    fill_with(index, 0, expected);
    EXPECT_EQ(tensor_bytes(file, name), expected) << name;
  }
  for (const char* name : {"big", "tail"}) {
    const std::vector<std::byte> bytes = tensor_bytes(file, name);
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](std::byte b) {
      return b == std::byte{0};
    })) << name;
  }
#ifndef _WIN32
  // 96 MiB of holes: the file system allocates a few blocks around the written tensors only.
  EXPECT_LT(allocated_bytes(path), std::uint64_t{1} << 20);
#endif
}

TEST(SafetensorsWriter, without_a_filler_every_tensor_is_a_hole) {
  test::ScratchDir dir;
  const auto path = dir / "header-only.safetensors";
  write_safetensors(path, kTensors, {{"k", "v"}}, {});
  const TensorFile file = TensorFile::open(path);
  EXPECT_EQ(std::filesystem::file_size(path),
            file.data_offset() + kTensors[0].bytes() + kTensors[1].bytes());
  EXPECT_EQ(tensor_bytes(file, "b"), std::vector<std::byte>(10));
  EXPECT_FALSE(std::filesystem::exists(dir / "header-only.safetensors.partial"));
}

}  // namespace
}  // namespace ferry::io
