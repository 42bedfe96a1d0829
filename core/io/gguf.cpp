#include "core/io/gguf.h"

#include <cstring>

namespace ferry::io {

bool is_gguf(std::span<const std::byte> prefix) {
  return prefix.size() >= 4 && std::memcmp(prefix.data(), "GGUF", 4) == 0;
}

}  // namespace ferry::io
