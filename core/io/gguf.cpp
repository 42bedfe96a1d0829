#include "core/io/gguf.h"

#include <cstring>

namespace ferry::io {

bool is_gguf(std::span<const std::byte> prefix) {
  return prefix.size() >= 4 && std::memcmp(prefix.data(), "GGUF", 4) == 0;
}

}  // namespace ferry::io

namespace ferry::io {

const GgufValue* GgufHeader::find(std::string_view key) const {
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

std::optional<std::string> GgufHeader::string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kString) return std::nullopt;
  return v->str;
}

std::optional<std::int64_t> GgufHeader::integer(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  switch (v->type) {
    case GgufType::kU8: case GgufType::kU16: case GgufType::kU32: case GgufType::kU64:
    case GgufType::kBool:
      return static_cast<std::int64_t>(v->u);
    case GgufType::kI8: case GgufType::kI16: case GgufType::kI32: case GgufType::kI64:
      return v->i;
    default:
      return std::nullopt;
  }
}

const std::vector<std::string>* GgufHeader::strings(std::string_view key) const {
  const GgufValue* v = find(key);
  return v != nullptr && v->type == GgufType::kArray && v->element_type == GgufType::kString
             ? &v->strings
             : nullptr;
}

const std::vector<std::int64_t>* GgufHeader::ints(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufType::kArray) return nullptr;
  const GgufType e = v->element_type;
  const bool integer = e != GgufType::kF32 && e != GgufType::kF64 && e != GgufType::kString &&
                       e != GgufType::kArray;
  return integer ? &v->ints : nullptr;
}

const std::vector<double>* GgufHeader::floats(std::string_view key) const {
  const GgufValue* v = find(key);
  return v != nullptr && v->type == GgufType::kArray &&
                 (v->element_type == GgufType::kF32 || v->element_type == GgufType::kF64)
             ? &v->floats
             : nullptr;
}

}  // namespace ferry::io
