// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON describing
// every tensor (dtype, shape, data_offsets relative to the data section), then the data section.
//
// The whole header is validated before any tensor is touched: the length bound below, valid
// UTF-8 JSON whose root is an object, only known dtypes, integer non-negative shapes whose byte
// size does not overflow and equals the data range, ranges inside the file that do not overlap,
// unique names, and a `__metadata__` map of strings. Every violation is Error(kBadModelFile)
// naming the file and the problem. Nothing is allocated with a size taken from the file before
// the file is known to hold that many bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/io/mapped_file.h"
#include "core/io/tensor_info.h"
#include "core/tensor/dtype.h"

namespace ferry::io {

// The JSON header may be at most this long: the bound of the reference implementation
// (huggingface/safetensors), so every file it writes can be read. Real headers are < 1 MB.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// Tensors of more dimensions than this are refused (PyTorch itself stops at 25 in practice).
inline constexpr std::size_t kMaxTensorRank = 16;

struct SafetensorsHeader {
  std::uint64_t data_offset = 0;     // 8 + N: where the data section starts
  std::vector<TensorInfo> tensors;   // in file order (ascending offset)
  std::map<std::string, std::string> metadata;
};

// Validates the 8-byte prefix against the file size and returns N, the JSON length.
std::uint64_t safetensors_header_length(std::span<const std::byte> prefix, std::uint64_t file_size,
                                        std::string_view source);

// Parses and validates a header: `bytes` holds the file's first 8 + N bytes, `file_size` is
// the size of the whole file, `source` names the file in messages.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> bytes,
                                           std::uint64_t file_size, std::string_view source);

}  // namespace ferry::io
