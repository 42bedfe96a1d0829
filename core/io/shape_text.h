// A tensor's shape as Ferry's messages show it: "[5120, 13824]" (file shapes are unsigned,
// expected ones often signed).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ferry::io {

template <typename Int>
std::string shape_text_of(std::span<const Int> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

inline std::string shape_text(std::span<const std::uint64_t> shape) {
  return shape_text_of(shape);
}
inline std::string shape_text(std::span<const std::int64_t> shape) {
  return shape_text_of(shape);
}

}  // namespace ferry::io
