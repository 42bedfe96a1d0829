// How a model describes itself to the offload engine: an ordered list of layer groups (a block:
// its named tensors, where they live in the model files and their bytes in the stored dtype),
// plus an activation estimate for a given size. The engine knows nothing else about models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/tensor_file.h"

namespace ferry::offload {

struct WeightRef {
  const io::TensorFile* file = nullptr;  // owned by the model's TensorSet
  const io::TensorInfo* tensor = nullptr;
};

struct LayerGroup {
  std::string name;               // "blocks.7", "embeddings", "head"
  std::vector<WeightRef> weights;  // in the order the model reads them
  // True for the small tensors every step needs (embeddings, time MLPs, head): never streamed.
  bool always_resident = false;

  std::uint64_t bytes() const;
  // Bytes in a device slot: each tensor starts on a 256-byte boundary.
  std::uint64_t slot_bytes() const;
};

struct ModelLayout {
  std::string name;                 // "Wan 2.2 TI2V-5B DiT"
  std::vector<LayerGroup> groups;   // in execution order
  // Working memory one forward pass needs besides the weights (activations, attention and FFN
  // scratch), for the size being generated, in bytes of device memory.
  std::uint64_t activation_bytes = 0;

  std::uint64_t weight_bytes() const;
};

// Where a tensor of `bytes` starts in a slot after `offset` bytes are used.
inline std::uint64_t slot_align(std::uint64_t offset) { return (offset + 255) / 256 * 256; }

}  // namespace ferry::offload
