// How one value of a quantised weight is decoded, for the device kernels (quant.cu) and for the
// host tests that check the very same code bit for bit against the CPU's dequantisers
// (tests/gpu/quant_host_test.cpp): ggml's blocks per formats_lora_moe.md §1.2, bitsandbytes 4-bit
// per §2.4, all in f32 with the reference's association. Plain C++ when a host compiler includes
// it; __host__ __device__ under nvcc (float_codec.h's FERRY_HD).
#pragma once

#include <cstdint>
#include <limits>

#include "core/tensor/dtype.h"
#include "cuda/float_codec.h"

namespace ferry::cuda {

// A quantised weight as the kernels read it. `data` holds whole ggml blocks (row-major, each row
// whole blocks) or, for kBnb4, the packed 4-bit codes (value j in the high nibble of byte j/2 when
// j is even, the low one when odd). The bnb4 fields point into the memory the decoder runs in.
struct QuantWeight {
  DType dtype = DType::kQ8_0;
  const void* data = nullptr;
  // kBnb4 only: scale[b] = absmax[b] (F32, plain), or nested_code[absmax[b]] ·
  // nested_absmax[b / nested_blocksize] + nested_offset (U8 absmax, nested); value j =
  // code[c_j] · scale[j / blocksize].
  const void* absmax = nullptr;
  bool nested = false;
  const float* code = nullptr;
  const float* nested_absmax = nullptr;
  const float* nested_code = nullptr;
  float nested_offset = 0.0f;
  std::int64_t blocksize = 64;
  std::int64_t nested_blocksize = 256;
};

namespace quant {

// f32 arithmetic exactly as written: on the device the explicitly rounded intrinsics, which nvcc
// never contracts into an FMA; on the host plain operators (the host tests build without FMA
// contraction, as the CPU dequantisers do).
FERRY_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FERRY_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
FERRY_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// A little-endian half at b (blocks are only 2-byte aligned: read bytes).
FERRY_HD float half_at(const std::uint8_t* b) {
  return codec::decode_f16(static_cast<std::uint32_t>(b[0]) |
                           (static_cast<std::uint32_t>(b[1]) << 8));
}

FERRY_HD float f32(int v) {
  return static_cast<float>(v);
}

// Value p of one ggml block, per type: kElems values in kBytes bytes.
template <DType T>
struct Block;

template <>
struct Block<DType::kQ8_0> {  // 0 d; 2 i8 qs[32]
  static constexpr int kElems = 32, kBytes = 34;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    return mul(f32(static_cast<std::int8_t>(b[2 + p])), half_at(b));
  }
};

// The 4-bit value p of a legacy block's qs: low nibbles are the first 16 values, high the last.
FERRY_HD int legacy_nibble(const std::uint8_t* qs, int p) {
  return p < 16 ? qs[p] & 15 : qs[p - 16] >> 4;
}

// The fifth bit of value p: bit p of the little-endian u32 qh.
FERRY_HD int legacy_high_bit(const std::uint8_t* qh, int p) {
  return ((qh[p >> 3] >> (p & 7)) & 1) << 4;
}

template <>
struct Block<DType::kQ4_0> {  // 0 d; 2 qs[16]
  static constexpr int kElems = 32, kBytes = 18;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    return mul(f32(legacy_nibble(b + 2, p) - 8), half_at(b));
  }
};

template <>
struct Block<DType::kQ4_1> {  // 0 d; 2 m; 4 qs[16]
  static constexpr int kElems = 32, kBytes = 20;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    return add(mul(f32(legacy_nibble(b + 4, p)), half_at(b)), half_at(b + 2));
  }
};

template <>
struct Block<DType::kQ5_0> {  // 0 d; 2 qh[4]; 6 qs[16]
  static constexpr int kElems = 32, kBytes = 22;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    const int q = legacy_nibble(b + 6, p) | legacy_high_bit(b + 2, p);
    return mul(f32(q - 16), half_at(b));
  }
};

template <>
struct Block<DType::kQ5_1> {  // 0 d; 2 m; 4 qh[4]; 8 qs[16]
  static constexpr int kElems = 32, kBytes = 24;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    const int q = legacy_nibble(b + 8, p) | legacy_high_bit(b + 4, p);
    return add(mul(f32(q), half_at(b)), half_at(b + 2));
  }
};

// Q2_K and Q3_K split the value index as p = 128h + 32j + 16g + l: the 2-bit value is bits 2j of
// qs[32h + 16g + l].
FERRY_HD int k_low_2bits(const std::uint8_t* qs, int p) {
  const int h = p >> 7, j = (p >> 5) & 3, g = (p >> 4) & 1, l = p & 15;
  return (qs[32 * h + 16 * g + l] >> (2 * j)) & 3;
}

template <>
struct Block<DType::kQ2_K> {  // 0 scales[16]; 16 qs[64]; 80 d; 82 dmin
  static constexpr int kElems = 256, kBytes = 84;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    const int sc = b[p >> 4];
    const float dl = mul(half_at(b + 80), f32(sc & 15));
    const float ml = mul(half_at(b + 82), f32(sc >> 4));
    return sub(mul(dl, f32(k_low_2bits(b + 16, p))), ml);
  }
};

template <>
struct Block<DType::kQ3_K> {  // 0 hmask[32]; 32 qs[64]; 96 scales[12]; 108 d
  static constexpr int kElems = 256, kBytes = 110;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    const int h = p >> 7, j = (p >> 5) & 3, g = (p >> 4) & 1, l = p & 15;
    // The stored high bit says "not negative": a clear bit subtracts 4.
    const int high = (b[16 * g + l] >> (4 * h + j)) & 1;
    const int q = k_low_2bits(b + 32, p) - (high != 0 ? 0 : 4);
    // The 6-bit scale of sub-block s: 4 low bits from scales[0..7], 2 high from scales[8..11].
    const std::uint8_t* s6 = b + 96;
    const int s = p >> 4;
    const int lo4 = s < 8 ? s6[s] & 15 : s6[s - 8] >> 4;
    const int hi2 = (s6[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
    const int sc = (lo4 | (hi2 << 4)) - 32;
    return mul(mul(half_at(b + 108), f32(sc)), f32(q));
  }
};

// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block k of a Q4_K / Q5_K block.
FERRY_HD void scale_min_k4(const std::uint8_t* s, int k, int* sc, int* mn) {
  if (k < 4) {
    *sc = s[k] & 63;
    *mn = s[k + 4] & 63;
  } else {
    *sc = (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4);
    *mn = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

// Sub-block k = p / 32 of a Q4_K / Q5_K block: value p is a nibble of qs[32·(p/64) + p%32], the
// low one for even k.
FERRY_HD int k_nibble(const std::uint8_t* qs, int p) {
  const std::uint8_t byte = qs[32 * (p >> 6) + (p & 31)];
  return ((p >> 5) & 1) != 0 ? byte >> 4 : byte & 15;
}

FERRY_HD float k_scaled(const std::uint8_t* b, int p, int q) {
  int sc = 0, mn = 0;
  scale_min_k4(b + 4, p >> 5, &sc, &mn);
  return sub(mul(mul(half_at(b), f32(sc)), f32(q)), mul(half_at(b + 2), f32(mn)));
}

template <>
struct Block<DType::kQ4_K> {  // 0 d; 2 dmin; 4 scales[12]; 16 qs[128]
  static constexpr int kElems = 256, kBytes = 144;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    return k_scaled(b, p, k_nibble(b + 16, p));
  }
};

template <>
struct Block<DType::kQ5_K> {  // 0 d; 2 dmin; 4 scales[12]; 16 qh[32]; 48 qs[128]
  static constexpr int kElems = 256, kBytes = 176;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    const int high = ((b[16 + (p & 31)] >> (p >> 5)) & 1) << 4;
    return k_scaled(b, p, k_nibble(b + 48, p) | high);
  }
};

template <>
struct Block<DType::kQ6_K> {  // 0 ql[128]; 128 qh[64]; 192 i8 scales[16]; 208 d
  static constexpr int kElems = 256, kBytes = 210;
  FERRY_HD static float value(const std::uint8_t* b, int p) {
    // Half h of 128 values; in it, quarter k takes nibble k/2 of ql[64h + 32·(k&1) + l] and bits
    // 2k of qh[32h + l].
    const int h = p >> 7, k = (p >> 5) & 3, l = p & 31;
    const std::uint8_t low = b[64 * h + 32 * (k & 1) + l];
    const int nibble = (k >> 1) != 0 ? low >> 4 : low & 15;
    const int q = nibble | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4);
    const int sc = static_cast<std::int8_t>(b[192 + (p >> 4)]);
    return mul(mul(half_at(b + 208), f32(sc)), f32(q - 32));
  }
};

// Value j of a ggml weight (row-major, rows whole blocks: the blocks are consecutive).
template <DType T>
struct BlockSource {
  const std::uint8_t* data;
  FERRY_HD float value(std::int64_t j) const {
    using B = Block<T>;
    return B::value(data + (j / B::kElems) * B::kBytes, static_cast<int>(j % B::kElems));
  }
};

// Value j of a bitsandbytes 4-bit weight.
struct Bnb4Source {
  QuantWeight w;
  FERRY_HD float value(std::int64_t j) const {
    const std::uint8_t byte = static_cast<const std::uint8_t*>(w.data)[j >> 1];
    const int c = (j & 1) != 0 ? byte & 15 : byte >> 4;
    const std::int64_t b = j / w.blocksize;
    float scale;
    if (w.nested) {
      const std::uint8_t a = static_cast<const std::uint8_t*>(w.absmax)[b];
      scale = add(mul(w.nested_code[a], w.nested_absmax[b / w.nested_blocksize]), w.nested_offset);
    } else {
      scale = static_cast<const float*>(w.absmax)[b];
    }
    return mul(w.code[c], scale);
  }
};

// Value j of any weight the decoders above know, chosen at run time (the host tests; the kernels
// instantiate one source per dtype instead). NaN for a dtype they do not decode.
inline float value_at(const QuantWeight& w, std::int64_t j) {
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  switch (w.dtype) {
    case DType::kQ4_0:
      return BlockSource<DType::kQ4_0>{data}.value(j);
    case DType::kQ4_1:
      return BlockSource<DType::kQ4_1>{data}.value(j);
    case DType::kQ5_0:
      return BlockSource<DType::kQ5_0>{data}.value(j);
    case DType::kQ5_1:
      return BlockSource<DType::kQ5_1>{data}.value(j);
    case DType::kQ8_0:
      return BlockSource<DType::kQ8_0>{data}.value(j);
    case DType::kQ2_K:
      return BlockSource<DType::kQ2_K>{data}.value(j);
    case DType::kQ3_K:
      return BlockSource<DType::kQ3_K>{data}.value(j);
    case DType::kQ4_K:
      return BlockSource<DType::kQ4_K>{data}.value(j);
    case DType::kQ5_K:
      return BlockSource<DType::kQ5_K>{data}.value(j);
    case DType::kQ6_K:
      return BlockSource<DType::kQ6_K>{data}.value(j);
    case DType::kBnb4:
      return Bnb4Source{w}.value(j);
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace quant
}  // namespace ferry::cuda
