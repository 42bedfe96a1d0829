#include "core/tensor/dtype.h"

#include <array>
#include <string>

#include "core/error.h"

namespace ferry {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::int64_t block_elems;  // 1 for element types
  std::size_t block_bytes;   // the element size for element types
  bool safetensors;          // a dtype a safetensors header may name
};

constexpr std::array<DTypeInfo, 23> kDTypes = {{
    {DType::kF64, "F64", 1, 8, true},
    {DType::kF32, "F32", 1, 4, true},
    {DType::kF16, "F16", 1, 2, true},
    {DType::kBF16, "BF16", 1, 2, true},
    {DType::kF8E4M3, "F8_E4M3", 1, 1, true},
    {DType::kF8E5M2, "F8_E5M2", 1, 1, true},
    {DType::kI64, "I64", 1, 8, true},
    {DType::kI32, "I32", 1, 4, true},
    {DType::kI16, "I16", 1, 2, true},
    {DType::kI8, "I8", 1, 1, true},
    {DType::kU8, "U8", 1, 1, true},
    {DType::kBool, "BOOL", 1, 1, true},
    // Block sizes and bytes of ggml's block structs (formats_lora_moe.md §1.2).
    {DType::kQ4_0, "Q4_0", 32, 18, false},
    {DType::kQ4_1, "Q4_1", 32, 20, false},
    {DType::kQ5_0, "Q5_0", 32, 22, false},
    {DType::kQ5_1, "Q5_1", 32, 24, false},
    {DType::kQ8_0, "Q8_0", 32, 34, false},
    {DType::kQ2_K, "Q2_K", 256, 84, false},
    {DType::kQ3_K, "Q3_K", 256, 110, false},
    {DType::kQ4_K, "Q4_K", 256, 144, false},
    {DType::kQ5_K, "Q5_K", 256, 176, false},
    {DType::kQ6_K, "Q6_K", 256, 210, false},
    {DType::kBnb4, "BNB4", 2, 1, false},
}};

const DTypeInfo& info(DType dtype) {
  return kDTypes[static_cast<std::size_t>(dtype)];
}

}  // namespace

std::size_t dtype_size(DType dtype) {
  const DTypeInfo& i = info(dtype);
  if (i.block_elems != 1) {
    throw Error(ErrorCode::kInternal, "dtype_size of the block type " + std::string(i.name) +
                                          ": use dtype_storage_bytes");
  }
  return i.block_bytes;
}

bool dtype_is_blocked(DType dtype) {
  return info(dtype).block_elems != 1;
}

std::int64_t dtype_block_elems(DType dtype) {
  return info(dtype).block_elems;
}

std::size_t dtype_block_bytes(DType dtype) {
  return info(dtype).block_bytes;
}

std::uint64_t dtype_storage_bytes(DType dtype, std::uint64_t count) {
  const DTypeInfo& i = info(dtype);
  const auto block = static_cast<std::uint64_t>(i.block_elems);
  if (count % block != 0) {
    throw Error(ErrorCode::kInternal, std::to_string(count) + " values of " + std::string(i.name) +
                                          " are not a whole number of " + std::to_string(block) +
                                          "-value blocks");
  }
  return count / block * i.block_bytes;
}

std::string_view dtype_name(DType dtype) {
  return info(dtype).name;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& entry : kDTypes) {
    if (entry.safetensors && entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

}  // namespace ferry
