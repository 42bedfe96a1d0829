// How a stored weight's codes become values beyond what its dtype says: the per-tensor scale of
// ComfyUI's scaled fp8 files, and the side tensors of a bitsandbytes 4-bit weight. Backends take
// a WeightScaling with every weight they multiply by (Backend::linear).
#pragma once

#include <cstdint>

#include "core/tensor/tensor.h"

namespace ferry {

// A bitsandbytes NF4 / FP4 weight's quant state (formats_lora_moe.md §2.2–2.4), as views on the
// same device as the weight's codes (a kBnb4 tensor of logical shape [out, in]). Value j of the
// row-major flattened weight is code[c_j] · scale[j / blocksize], where scale[b] is
//   absmax[b]                                                          (plain: absmax is F32)
//   nested_code[absmax[b]] · nested_absmax[b / nested_blocksize] + nested_offset
//                                                                      (nested: absmax is U8)
// all in f32. Blocks never straddle rows: readers refuse a weight whose `in` is not a multiple of
// blocksize.
struct Bnb4State {
  Tensor absmax;         // F32 [blocks] or U8 [blocks]
  Tensor code;           // F32 [16]: the 4-bit code book (NF4 or FP4), as the file stores it
  Tensor nested_absmax;  // F32 [ceil(blocks / nested_blocksize)]; empty when plain
  Tensor nested_code;    // F32 [256]: bitsandbytes' dynamic 8-bit map; empty when plain
  float nested_offset = 0.0f;
  std::int64_t blocksize = 64;
  std::int64_t nested_blocksize = 256;

  bool nested() const { return absmax.dtype == DType::kU8; }
};

// An int8 ConvRot weight (Comfy-Org's `int8_tensorwise` with `"convrot": true`, minimax_h3.md
// §G.3): codes q int8 [out, in] with one f32 scale per row, in a rotated basis. The weight is
//   W = (q · s) · H_g   per group of g input columns,
// H_g the regular Hadamard of order g (a power of 4: h4 ⊗ h4 ⊗ … / √g, symmetric, orthogonal,
// self-inverse), so x · Wᵀ = (x · H_g per group) · (q · s)ᵀ. Views on the weight's device.
struct ConvRotState {
  Tensor row_scale;             // F32 [out, 1] or [out]: s
  std::int64_t group_size = 0;  // g
};

// Everything beyond the weight tensor a backend needs to turn codes into values.
struct WeightScaling {
  WeightScaling() = default;
  // Implicit: the per-tensor scale is what most call sites pass (1 for plain float weights).
  WeightScaling(float per_tensor) : scale(per_tensor) {}  // NOLINT(google-explicit-constructor)

  float scale = 1.0f;                     // multiplies every value (fp8 with `scale_weight`)
  const Bnb4State* bnb4 = nullptr;        // required for, and only for, a kBnb4 weight
  const ConvRotState* convrot = nullptr;  // required for, and only for, a kI8 weight
};

}  // namespace ferry
