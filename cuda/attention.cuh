// Attention without the L×S score matrix: o[L,H,D] = softmax(q·kᵀ·scale + bias)·v per head (key
// and value heads shared by groups of H/Hk query heads; optionally causal, query i seeing keys
// 0…i, the key loop stopping at the block's last query), an
// exact online softmax in f32 (running max and sum; each new tile rescales what was accumulated
// by exp(old max - new max)). Two kernels:
// - flash: bf16 q, k, v with head_dim 128, no bias, sm_80+: 64 queries × 64 keys per tile on
//   tensor cores (mma.sync m16n8k16, f32 accumulation). P is rounded to bf16 for P·V, as
//   FlashAttention does; the row sums add the same rounded values, so every output row is an
//   exact convex combination of v rows up to the f32 accumulation.
// - tiled: any float dtypes, head_dim up to 1024, the optional T5 relative-position bias; plain
//   f32 FMAs, P kept in f32. 16 queries per block, keys through shared memory 8 at a time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor/dtype.h"

namespace ferry::cuda {

inline constexpr std::int64_t kMaxTiledHeadDim = 1024;

struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  DType q_dtype = DType::kF32, k_dtype = DType::kF32, v_dtype = DType::kF32, o_dtype = DType::kF32;
  std::int64_t len = 0;    // L (queries)
  std::int64_t keys = 0;   // S
  std::int64_t heads = 0;  // H
  std::int64_t kv_heads = 0;  // Hk (divides H): k and v are [S, Hk, D]
  std::int64_t dim = 0;    // D
  float scale = 1.0f;
  bool causal = false;        // L = S; key j visible to query i when j ≤ i
  const void* rel = nullptr;  // T5 table [32, H], or nullptr
  DType rel_dtype = DType::kF32;
  float log16 = 0.0f;  // static_cast<float>(std::log(16.0)), for the bucket function
};

// Whether the flash kernel takes these arguments on a GPU of this compute capability (major·10 +
// minor): bf16 q/k/v, D = 128, no bias, 16-byte aligned q/k/v, sm_80 or newer.
bool flash_attention_applies(const AttentionArgs& a, int compute_capability);

// Both need keys ≥ 1 and len, heads, dim ≥ 1 (the caller handles the empty cases).
void launch_flash_attention(const AttentionArgs& a, cudaStream_t stream);
void launch_tiled_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace ferry::cuda
