// Writes safetensors files: synthetic checkpoints for tests, benchmarks and the demo model.
// The data section starts on an 8-byte boundary, as the reference writer does, and the file
// appears under its name only when complete (written to "<name>.partial", then renamed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor/dtype.h"

namespace ferry::io {

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::uint64_t> shape;

  std::uint64_t bytes() const;
};

// Fills `out` with bytes [offset, offset + out.size()) of tensor `index`.
using TensorFiller =
    std::function<void(std::size_t index, std::uint64_t offset, std::span<std::byte> out)>;

// The header text (JSON) the writer puts in front of `tensors`, in order, without padding.
std::string safetensors_header_json(const std::vector<TensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata);

// Throws Error(kIo) when the file cannot be written (the partial file is removed).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const TensorFiller& fill);

}  // namespace ferry::io
