// Writes safetensors files: synthetic checkpoints for tests, benchmarks and the demo model.
// The data section starts on an 8-byte boundary, as the reference writer does, and the file
// appears under its name only when complete (written to "<name>.partial", then renamed).
// Tensors can be left as sparse holes (read as zeros, take no disk): header-only files of real
// size, with the few tensors a loader reads at open (fp8 scales, a tokenizer) written for real.
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

// True for a tensor whose bytes are left a hole (never passed to the filler).
using TensorHoles = std::function<bool(std::size_t index)>;

// Throws Error(kIo) when the file cannot be written (the partial file is removed). Tensor i is
// left a hole when `holes` is given and holes(i) is true; an empty `fill` leaves every tensor a
// hole.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& tensors,
                       const std::map<std::string, std::string>& metadata, const TensorFiller& fill,
                       const TensorHoles& holes = {});

}  // namespace ferry::io
