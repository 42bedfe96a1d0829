// The GGUF container (formats_lora_moe.md §1.1): "GGUF", version 2 or 3, tensor and key/value
// counts, the key/value pairs, the tensor infos, padding to the alignment, then the data.
//
// The same discipline as the safetensors reader: the whole header is validated before any
// tensor is touched — counts, string and array lengths bounded by what the file can hold and by
// the limits below, known value types and tensor types only, every ne[] positive with no
// overflow, row lengths whole blocks, the alignment a power of two, offsets aligned, ranges inside
// the file and not overlapping, unique names. Every violation is Error(kBadModelFile) naming the
// file and the problem; nothing is allocated with a size taken from the file before the file is
// known to hold that many bytes. One exception: a `comfy.gguf.orig_shape.<name>` reshape whose
// rows would split the tensor's quant blocks is Error(kUnsupported) (the file may be fine; the
// backends dequantise whole rows of blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/tensor_info.h"

namespace ferry::io {

// Bounds on what a header may claim (real files: umT5-XXL's tokenizer holds 256 384 strings).
inline constexpr std::uint64_t kMaxGgufTensors = 1'000'000;
inline constexpr std::uint64_t kMaxGgufKeyValues = 1'000'000;
inline constexpr std::uint64_t kMaxGgufStringBytes = 1ull << 24;
inline constexpr std::uint64_t kMaxGgufArrayElements = 1ull << 26;
inline constexpr std::uint32_t kMaxGgufArrayDepth = 4;
// What the parsed key/values and names may occupy in memory (umT5's tokenizer: about 20 MiB), so
// a hostile header of small records cannot make the reader allocate many times the file's size.
inline constexpr std::uint64_t kMaxGgufMetadataBytes = 512ull << 20;
inline constexpr std::uint32_t kMaxGgufDims = 8;
// ggml accepts any power of two; real files use 32 (the default) or 64. A larger one only wastes
// the file's space, and a huge one is a corrupt header.
inline constexpr std::uint64_t kMaxGgufAlignment = 1ull << 20;

enum class GgufType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// One value of the key/value section. Scalars are held in the widest field of their kind;
// arrays by element kind (nested arrays in `items`).
struct GgufValue {
  GgufType type = GgufType::kU32;
  GgufType element_type = GgufType::kU32;  // arrays only
  std::uint64_t u = 0;                     // unsigned integers and bool
  std::int64_t i = 0;                      // signed integers
  double f = 0;                            // f32 and f64
  std::string str;
  std::vector<std::string> strings;  // array of strings
  std::vector<std::int64_t> ints;    // array of any integer type or bool
  std::vector<double> floats;        // array of f32 / f64
  std::vector<GgufValue> items;      // array of arrays
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufHeader {
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;       // where the data section starts (aligned)
  std::vector<GgufKeyValue> metadata;  // in file order
  // In offset order (the header's order for every writer we know); offsets absolute, shapes
  // reversed from ne[] (and replaced by a `comfy.gguf.orig_shape.<name>` array when one exists).
  std::vector<TensorInfo> tensors;

  const GgufValue* find(std::string_view key) const;
  // Typed lookups: nullopt / nullptr when absent or of another type.
  std::optional<std::string> string(std::string_view key) const;
  std::optional<std::int64_t> integer(std::string_view key) const;  // any integer type
  const std::vector<std::string>* strings(std::string_view key) const;
  const std::vector<std::int64_t>* ints(std::string_view key) const;
  const std::vector<double>* floats(std::string_view key) const;
};

// True when `prefix` (a file's first bytes) starts with the GGUF magic.
bool is_gguf(std::span<const std::byte> prefix);

// The ggml tensor type id → Ferry's dtype (F32, F16, BF16, Q4_0 ... Q6_K); nullopt for the
// types Ferry does not read (IQ*, TQ*, Q8_1, Q8_K, ...).
std::optional<DType> dtype_from_ggml_type(std::uint32_t type);

// Parses and validates a header: `bytes` holds the file from its start (the whole file, or at
// least the header; a header running past `bytes` is a truncated file), `file_size` is the size of
// the whole file, `source` names the file in messages. Reading stops at the data section.
GgufHeader parse_gguf_header(std::span<const std::byte> bytes, std::uint64_t file_size,
                             std::string_view source);

// The same, for a reader that copies the file's start in growing chunks: nullopt when the header
// runs past `bytes` while the file holds more (read a longer prefix and call again). Every other
// problem throws as parse_gguf_header does.
std::optional<GgufHeader> try_parse_gguf_header(std::span<const std::byte> bytes,
                                                std::uint64_t file_size, std::string_view source);

}  // namespace ferry::io
