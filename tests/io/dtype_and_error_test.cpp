// dtype names and sizes as safetensors spells them; error codes and their exit codes.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/tensor/dtype.h"

namespace ferry {
namespace {

TEST(DType, every_safetensors_name_round_trips_with_its_size) {
  const std::pair<const char*, std::size_t> expected[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"BOOL", 1}};
  for (const auto& [name, size] : expected) {
    const auto dtype = dtype_from_name(name);
    ASSERT_TRUE(dtype.has_value()) << name;
    EXPECT_EQ(dtype_name(*dtype), name);
    EXPECT_EQ(dtype_size(*dtype), size) << name;
  }
  for (const char* unknown : {"f32", "F8_E4M3FN", "U16", "C64", "", "F32 "}) {
    EXPECT_FALSE(dtype_from_name(unknown).has_value()) << unknown;
  }
}

TEST(Error, exit_codes_follow_the_cli_contract) {
  EXPECT_EQ(exit_code(ErrorCode::kBadArgument), 2);
  EXPECT_EQ(exit_code(ErrorCode::kBadModelFile), 2);
  EXPECT_EQ(exit_code(ErrorCode::kMissingTensor), 2);
  EXPECT_EQ(exit_code(ErrorCode::kDoesNotFit), 3);
  EXPECT_EQ(exit_code(ErrorCode::kIo), 4);
  EXPECT_EQ(exit_code(ErrorCode::kCancelled), 130);
  EXPECT_EQ(exit_code(ErrorCode::kInternal), 1);
  EXPECT_EQ(exit_code(ErrorCode::kOutOfMemory), 1);
}

TEST(Error, posix_errors_carry_the_system_text) {
  const Error e = posix_error(ErrorCode::kIo, "cannot open x", 2);
  EXPECT_EQ(e.code(), ErrorCode::kIo);
  EXPECT_EQ(std::string(e.what()).rfind("cannot open x: ", 0), 0u) << e.what();
  EXPECT_GT(std::string(e.what()).size(), std::string("cannot open x: ").size());
}

}  // namespace
}  // namespace ferry
