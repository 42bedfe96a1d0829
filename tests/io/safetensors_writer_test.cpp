// write_safetensors publishes a file only when it is complete: a failure leaves nothing behind.
#include "core/io/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>

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

}  // namespace
}  // namespace ferry::io
