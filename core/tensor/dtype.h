// Element types as stored in model files, with their sizes and names.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ferry {

enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
};

std::size_t dtype_size(DType dtype);

// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);

// Parses a safetensors dtype name; nullopt for anything Ferry does not know.
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace ferry
