// One tensor of a model file, whatever the container (safetensors, GGUF): its name, how it is
// stored and where its bytes are. Shapes are in PyTorch order (the last dimension contiguous);
// a GGUF tensor's ne[] is reversed into it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor/dtype.h"

namespace ferry::io {

// The quant state of a bitsandbytes 4-bit weight (formats_lora_moe.md §2.2): parsed from its
// `<p>.weight.quant_state.bitsandbytes__nf4` (or `__fp4`) JSON, with the names of its side tensors
// in the same file. The weight's own TensorInfo then has dtype kBnb4 and the logical shape
// [out, in].
struct Bnb4Info {
  std::string quant_type;  // "nf4" or "fp4"
  std::int64_t blocksize = 64;
  DType dtype = DType::kBF16;  // what bitsandbytes would dequantise to
  bool nested = false;
  std::int64_t nested_blocksize = 256;
  float nested_offset = 0.0f;
  std::string absmax;            // `<p>.weight.absmax`: F32 (plain) or U8 (nested) [blocks]
  std::string quant_map;         // `<p>.weight.quant_map`: F32 [16]
  std::string nested_absmax;     // nested only: F32 [ceil(blocks / nested_blocksize)]
  std::string nested_quant_map;  // nested only: F32 [256]
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::uint64_t> shape;
  std::uint64_t offset = 0;  // absolute byte offset in the file
  std::uint64_t bytes = 0;
  // Set for, and only for, a bitsandbytes 4-bit weight (dtype kBnb4).
  std::shared_ptr<const Bnb4Info> bnb4;

  std::uint64_t element_count() const;
};

// 'name' for messages, cut at 120 bytes on a character boundary (names come from files).
std::string quote_tensor_name(std::string_view name);

}  // namespace ferry::io
