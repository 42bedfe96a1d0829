// Block dequantisers, one function per ggml type, written from formats_lora_moe.md §1.2 with the
// association of gguf-py's numpy code (the product of the scales first, then the code); and the
// bitsandbytes 4-bit decoder of §2.4. This file is compiled with -ffp-contract=off: a fused
// multiply-add in `dl * q - ml` would round once where ggml rounds twice.
#include "core/backend/cpu/quant_blocks.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/tensor/convert.h"

namespace ferry::cpu {
namespace {

using Byte = std::uint8_t;

// A little-endian half at `at` (any alignment), widened exactly.
float half_at(const Byte* at) {
  std::uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  return f16_to_f32(bits);
}

// ---- legacy blocks of 32 ----

void q8_0(const Byte* b, float* w) {
  const float d = half_at(b);
  const auto* qs = reinterpret_cast<const std::int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) w[j] = static_cast<float>(qs[j]) * d;
}

void q4_0(const Byte* b, float* w) {
  const float d = half_at(b);
  const Byte* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    w[j] = d * static_cast<float>((qs[j] & 15) - 8);
    w[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void q4_1(const Byte* b, float* w) {
  const float d = half_at(b);
  const float m = half_at(b + 2);
  const Byte* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    w[j] = d * static_cast<float>(qs[j] & 15) + m;
    w[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// The 32 five-bit codes of a Q5_0 / Q5_1 block: low nibbles first, then high nibbles, each with
// its bit of the little-endian u32 qh on top.
void five_bit_codes(const Byte* qh_bytes, const Byte* qs, int* q) {
  std::uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
  }
}

void q5_0(const Byte* b, float* w) {
  const float d = half_at(b);
  int q[32];
  five_bit_codes(b + 2, b + 6, q);
  for (int j = 0; j < 32; ++j) w[j] = d * static_cast<float>(q[j] - 16);
}

void q5_1(const Byte* b, float* w) {
  const float d = half_at(b);
  const float m = half_at(b + 2);
  int q[32];
  five_bit_codes(b + 4, b + 8, q);
  for (int j = 0; j < 32; ++j) w[j] = d * static_cast<float>(q[j]) + m;
}

// ---- K-quants: super-blocks of 256 ----

void q2_k(const Byte* b, float* w) {
  const Byte* scales = b;
  const Byte* qs = b + 16;
  const float d = half_at(b + 80);
  const float dmin = half_at(b + 82);
  // Output p = 128h + 32j + l: code (qs[32h + l] >> 2j) & 3, sub-block of 16 p / 16.
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const int s = 8 * h + 2 * j + half;
        const float dl = d * static_cast<float>(scales[s] & 15);
        const float ml = dmin * static_cast<float>(scales[s] >> 4);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int q = (qs[32 * h + l] >> (2 * j)) & 3;
          w[128 * h + 32 * j + l] = dl * static_cast<float>(q) - ml;
        }
      }
    }
  }
}

void q3_k(const Byte* b, float* w) {
  const Byte* hmask = b;
  const Byte* qs = b + 32;
  const Byte* scales = b + 96;
  const float d = half_at(b + 108);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        // 6-bit signed scale of sub-block s: 4 low bits from scales[0..8), 2 high from [8..12).
        const int s = 8 * h + 2 * j + half;
        const int lo4 = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
        const int hi2 = (scales[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
        const float dl = d * static_cast<float>((lo4 | (hi2 << 4)) - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          // The stored high bit says "non-negative": a clear bit subtracts 4.
          const int q2 = (qs[32 * h + l] >> (2 * j)) & 3;
          const int high = (hmask[l] >> (4 * h + j)) & 1;
          w[128 * h + 32 * j + l] = dl * static_cast<float>(q2 - (high != 0 ? 0 : 4));
        }
      }
    }
  }
}

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block k (0..7) from 12 packed bytes.
void scale_min_k4(const Byte* s, int k, int& scale, int& min) {
  if (k < 4) {
    scale = s[k] & 63;
    min = s[k + 4] & 63;
  } else {
    scale = (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4);
    min = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

// Q4_K and Q5_K: sub-block k of 32 uses the low (k even) or high (k odd) nibbles of qs[32 (k/2)
// + l], plus, for Q5_K, bit k of qh[l] as the fifth bit.
template <bool kFifthBit>
void q45_k(const Byte* b, float* w) {
  const float d = half_at(b);
  const float dmin = half_at(b + 2);
  const Byte* scales = b + 4;
  const Byte* qh = b + 16;
  const Byte* qs = kFifthBit ? b + 48 : b + 16;
  for (int k = 0; k < 8; ++k) {
    int sc;
    int mn;
    scale_min_k4(scales, k, sc, mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const Byte* chunk = qs + 32 * (k / 2);
    const int shift = 4 * (k & 1);
    for (int l = 0; l < 32; ++l) {
      int q = (chunk[l] >> shift) & 15;
      if constexpr (kFifthBit) q |= ((qh[l] >> k) & 1) << 4;
      w[32 * k + l] = dl * static_cast<float>(q) - ml;
    }
  }
}

void q6_k(const Byte* b, float* w) {
  const float d = half_at(b + 208);
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
  for (int h = 0; h < 2; ++h) {
    const Byte* ql = b + 64 * h;
    const Byte* qh = b + 128 + 32 * h;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {
          (ql[l] & 15) | ((qh[l] & 3) << 4),
          (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
          (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
      };
      for (int k = 0; k < 4; ++k) {
        const int p = 128 * h + 32 * k + l;
        const float dl = d * static_cast<float>(scales[p / 16]);
        w[p] = dl * static_cast<float>(q[k] - 32);
      }
    }
  }
}

using BlockFn = void (*)(const Byte*, float*);

BlockFn block_fn(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
      return q8_0;
    case DType::kQ4_0:
      return q4_0;
    case DType::kQ4_1:
      return q4_1;
    case DType::kQ5_0:
      return q5_0;
    case DType::kQ5_1:
      return q5_1;
    case DType::kQ2_K:
      return q2_k;
    case DType::kQ3_K:
      return q3_k;
    case DType::kQ4_K:
      return q45_k<false>;
    case DType::kQ5_K:
      return q45_k<true>;
    case DType::kQ6_K:
      return q6_k;
    default:
      return nullptr;
  }
}

}  // namespace

void dequantize(DType dtype, const void* blocks, float* out, std::int64_t count) {
  if (count < 0) throw Error(ErrorCode::kInternal, "dequantize: negative count");
  if (dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16) {
    convert_to_f32(dtype, blocks, out, static_cast<std::size_t>(count));
    return;
  }
  const BlockFn fn = block_fn(dtype);
  if (fn == nullptr) {
    throw Error(ErrorCode::kInternal,
                "dequantize: " + std::string(dtype_name(dtype)) + " is not a ggml block type");
  }
  const std::int64_t elems = dtype_block_elems(dtype);
  const std::size_t bytes = dtype_block_bytes(dtype);
  if (count % elems != 0) {
    throw Error(ErrorCode::kInternal, "dequantize: " + std::to_string(count) + " values of " +
                                          std::string(dtype_name(dtype)) + " are not whole blocks");
  }
  const auto* b = static_cast<const Byte*>(blocks);
  for (std::int64_t i = 0; i < count / elems; ++i) {
    fn(b + static_cast<std::size_t>(i) * bytes, out + i * elems);
  }
}

namespace {

void require_bnb4(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorCode::kInternal, "bitsandbytes 4-bit weight: " + what);
}

}  // namespace

void bnb4_block_scales(const Bnb4State& state, std::int64_t first_block, std::int64_t blocks,
                       float* scales) {
  require_bnb4(first_block >= 0 && blocks >= 0 && first_block + blocks <= state.absmax.numel(),
               "blocks [" + std::to_string(first_block) + ", " +
                   std::to_string(first_block + blocks) + ") lie outside its " +
                   std::to_string(state.absmax.numel()) + " scales");
  if (!state.nested()) {
    require_bnb4(state.absmax.dtype == DType::kF32, "absmax is neither F32 nor U8");
    std::memcpy(scales, state.absmax.as<const float>() + first_block,
                static_cast<std::size_t>(blocks) * sizeof(float));
    return;
  }
  require_bnb4(state.nested_blocksize > 0, "nested_blocksize is not positive");
  require_bnb4(state.nested_code.dtype == DType::kF32 && state.nested_code.numel() == 256,
               "nested_code is not F32[256]");
  require_bnb4(state.nested_absmax.dtype == DType::kF32, "nested_absmax is not F32");
  if (blocks == 0) return;
  const std::int64_t last_nested = (first_block + blocks - 1) / state.nested_blocksize;
  require_bnb4(last_nested < state.nested_absmax.numel(),
               "nested_absmax has " + std::to_string(state.nested_absmax.numel()) +
                   " values for block " + std::to_string(first_block + blocks - 1));
  const auto* codes = state.absmax.as<const Byte>();
  const float* map = state.nested_code.as<const float>();
  const float* nested_absmax = state.nested_absmax.as<const float>();
  for (std::int64_t i = 0; i < blocks; ++i) {
    const std::int64_t block = first_block + i;
    scales[i] =
        map[codes[block]] * nested_absmax[block / state.nested_blocksize] + state.nested_offset;
  }
}

void dequantize_bnb4(const Bnb4State& state, const std::uint8_t* codes, std::int64_t first,
                     float* out, std::int64_t count) {
  require_bnb4(first >= 0 && count >= 0, "a negative range");
  require_bnb4(state.blocksize > 0, "blocksize is not positive");
  require_bnb4(state.code.dtype == DType::kF32 && state.code.numel() == 16,
               "the code book is not F32[16]");
  if (count == 0) return;
  const float* book = state.code.as<const float>();
  const std::int64_t bs = state.blocksize;
  std::int64_t j = first;
  const std::int64_t end = first + count;
  while (j < end) {
    const std::int64_t block = j / bs;
    const std::int64_t block_end = std::min(end, (block + 1) * bs);
    float scale;
    bnb4_block_scales(state, block, 1, &scale);
    for (; j < block_end; ++j) {
      const Byte pair = codes[j / 2];
      const int code = (j & 1) == 0 ? pair >> 4 : pair & 15;
      out[j - first] = book[code] * scale;
    }
  }
}

}  // namespace ferry::cpu
