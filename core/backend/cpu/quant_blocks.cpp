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

// The K-quants' AVX2 decoders: GCC or Clang on x86-64, chosen at run time by the CPU. Not on
// Windows: GCC there does not align the stack for 32-byte spills (its bug 54412), so mingw keeps
// the portable decoders.
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(_WIN32)
#define FERRY_QUANT_AVX2 1
#include <immintrin.h>
#else
#define FERRY_QUANT_AVX2 0
#endif

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

// ---- K-quants: super-blocks of 256, decoded a half (128 values) at a time ----
// Every K-quant's layout splits at 128: the GEMM packs panels of 128 values of a row (kc), and
// decoding a whole block for half of it would double the work.

// Q2_K's scale and min of sub-block s (of 16 values): 4 bits each in scales[s].
float q2_k_scale(const Byte* scales, int s, float d) {
  return d * static_cast<float>(scales[s] & 15);
}
float q2_k_min(const Byte* scales, int s, float dmin) {
  return dmin * static_cast<float>(scales[s] >> 4);
}

void q2_k(const Byte* b, int h, float* w) {
  const Byte* scales = b;
  const Byte* qs = b + 16 + 32 * h;
  const float d = half_at(b + 80);
  const float dmin = half_at(b + 82);
  // Output 128h + 32j + l: code (qs[32h + l] >> 2j) & 3, sub-block of 16 8h + 2j + l / 16.
  for (int j = 0; j < 4; ++j) {
    for (int g = 0; g < 2; ++g) {
      const int s = 8 * h + 2 * j + g;
      const float dl = q2_k_scale(scales, s, d);
      const float ml = q2_k_min(scales, s, dmin);
      for (int l = 16 * g; l < 16 * g + 16; ++l) {
        const int q = (qs[l] >> (2 * j)) & 3;
        w[32 * j + l] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Q3_K's scale of sub-block s (of 16 values): 6 bits, biased by 32, the 4 low ones from
// scales[0..8), the 2 high ones from scales[8..12).
float q3_k_scale(const Byte* scales, int s, float d) {
  const int lo4 = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
  const int hi2 = (scales[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
  return d * static_cast<float>((lo4 | (hi2 << 4)) - 32);
}

void q3_k(const Byte* b, int h, float* w) {
  const Byte* hmask = b;
  const Byte* qs = b + 32 + 32 * h;
  const Byte* scales = b + 96;
  const float d = half_at(b + 108);
  for (int j = 0; j < 4; ++j) {
    for (int g = 0; g < 2; ++g) {
      const int s = 8 * h + 2 * j + g;
      const float dl = q3_k_scale(scales, s, d);
      const int bit = 4 * h + j;
      for (int l = 16 * g; l < 16 * g + 16; ++l) {
        // The stored high bit says "non-negative": a clear bit subtracts 4.
        const int q2 = (qs[l] >> (2 * j)) & 3;
        const int high = (hmask[l] >> bit) & 1;
        w[32 * j + l] = dl * static_cast<float>(q2 - (high != 0 ? 0 : 4));
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
// + l], plus, for Q5_K, bit k of qh[l] as the fifth bit. Half h is sub-blocks 4h .. 4h + 3.
template <bool kFifthBit>
void q45_k(const Byte* b, int h, float* w) {
  const float d = half_at(b);
  const float dmin = half_at(b + 2);
  const Byte* scales = b + 4;
  const Byte* qh = b + 16;
  const Byte* qs = kFifthBit ? b + 48 : b + 16;
  for (int k = 4 * h; k < 4 * h + 4; ++k) {
    int sc;
    int mn;
    scale_min_k4(scales, k, sc, mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const Byte* chunk = qs + 32 * (k / 2);
    const int shift = 4 * (k & 1);
    float* out = w + 32 * (k - 4 * h);
    for (int l = 0; l < 32; ++l) {
      int q = (chunk[l] >> shift) & 15;
      if constexpr (kFifthBit) q |= ((qh[l] >> k) & 1) << 4;
      out[l] = dl * static_cast<float>(q) - ml;
    }
  }
}

void q6_k(const Byte* b, int h, float* w) {
  const float d = half_at(b + 208);
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192) + 8 * h;
  const Byte* ql = b + 64 * h;
  const Byte* qh = b + 128 + 32 * h;
  // Output 128h + 32k + l uses scale 8h + 2k + l / 16.
  float dl[8];
  for (int s = 0; s < 8; ++s) dl[s] = d * static_cast<float>(scales[s]);
  for (int l = 0; l < 32; ++l) {
    const int q1 = (ql[l] & 15) | ((qh[l] & 3) << 4);
    const int q2 = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
    const int q3 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
    const int q4 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    const int g = l / 16;
    w[l] = dl[g] * static_cast<float>(q1 - 32);
    w[l + 32] = dl[2 + g] * static_cast<float>(q2 - 32);
    w[l + 64] = dl[4 + g] * static_cast<float>(q3 - 32);
    w[l + 96] = dl[6 + g] * static_cast<float>(q4 - 32);
  }
}

#if FERRY_QUANT_AVX2
// ---- The K-quants on AVX2: the same arithmetic, 32 codes at a time ----
// Each decoder unpacks a sub-block's 32 codes into signed bytes with whole-register shifts and
// masks, widens them 8 at a time to f32 (exact), and applies the scalar decoder's scale (and min)
// with the same operations in the same order: dl * q, then - ml, each rounded (no FMA: this file
// is compiled with -ffp-contract=off and the target is AVX2 alone). The scales and mins are the
// scalar decoders' own helpers, so they round alike.
#define FERRY_AVX2 __attribute__((target("avx2")))

FERRY_AVX2 inline __m256i load_32(const Byte* at) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
}

// out[0..8) = dl * codes[0..8) (- ml), the codes the low 8 signed bytes of `codes`.
template <bool kMin>
FERRY_AVX2 inline void store_8(float* out, __m128i codes, __m256 dl, __m256 ml) {
  __m256 v = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(codes)));
  if constexpr (kMin) v = _mm256_sub_ps(v, ml);
  _mm256_storeu_ps(out, v);
}

// out[0..32) from 32 signed byte codes: the first 16 with dl0 (ml0), the last 16 with dl1 (ml1).
template <bool kMin>
FERRY_AVX2 inline void store_32(float* out, __m256i codes, float dl0, float ml0, float dl1,
                                float ml1) {
  const __m128i first = _mm256_castsi256_si128(codes);
  const __m128i second = _mm256_extracti128_si256(codes, 1);
  const __m256 d0 = _mm256_set1_ps(dl0);
  const __m256 m0 = _mm256_set1_ps(ml0);
  const __m256 d1 = _mm256_set1_ps(dl1);
  const __m256 m1 = _mm256_set1_ps(ml1);
  store_8<kMin>(out, first, d0, m0);
  store_8<kMin>(out + 8, _mm_srli_si128(first, 8), d0, m0);
  store_8<kMin>(out + 16, second, d1, m1);
  store_8<kMin>(out + 24, _mm_srli_si128(second, 8), d1, m1);
}

// The bytes of `bits` whose bit `mask` (one bit per byte) is set, as 0xFF; the others 0.
FERRY_AVX2 inline __m256i bit_set(__m256i bits, int mask) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(mask));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bits, m), m);
}

// Each byte of `bytes` shifted right by `count` (0..7), the bits from its neighbour masked off
// by the caller.
FERRY_AVX2 inline __m256i shift_right(__m256i bytes, int count) {
  return _mm256_srl_epi16(bytes, _mm_cvtsi32_si128(count));
}

FERRY_AVX2 void q2_k_avx2(const Byte* b, int h, float* w) {
  const Byte* scales = b;
  const __m256i qs = load_32(b + 16 + 32 * h);
  const float d = half_at(b + 80);
  const float dmin = half_at(b + 82);
  const __m256i three = _mm256_set1_epi8(3);
  for (int j = 0; j < 4; ++j) {
    const int s = 8 * h + 2 * j;
    const __m256i q = _mm256_and_si256(shift_right(qs, 2 * j), three);
    store_32<true>(w + 32 * j, q, q2_k_scale(scales, s, d), q2_k_min(scales, s, dmin),
                   q2_k_scale(scales, s + 1, d), q2_k_min(scales, s + 1, dmin));
  }
}

FERRY_AVX2 void q3_k_avx2(const Byte* b, int h, float* w) {
  const __m256i hmask = load_32(b);
  const __m256i qs = load_32(b + 32 + 32 * h);
  const Byte* scales = b + 96;
  const float d = half_at(b + 108);
  const __m256i three = _mm256_set1_epi8(3);
  const __m256i four = _mm256_set1_epi8(4);
  for (int j = 0; j < 4; ++j) {
    const int s = 8 * h + 2 * j;
    const __m256i q2 = _mm256_and_si256(shift_right(qs, 2 * j), three);
    // A clear high bit subtracts 4.
    const __m256i q =
        _mm256_sub_epi8(q2, _mm256_andnot_si256(bit_set(hmask, 1 << (4 * h + j)), four));
    store_32<false>(w + 32 * j, q, q3_k_scale(scales, s, d), 0.0f, q3_k_scale(scales, s + 1, d),
                    0.0f);
  }
}

template <bool kFifthBit>
FERRY_AVX2 void q45_k_avx2(const Byte* b, int h, float* w) {
  const float d = half_at(b);
  const float dmin = half_at(b + 2);
  const Byte* scales = b + 4;
  const Byte* qs = kFifthBit ? b + 48 : b + 16;
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i sixteen = _mm256_set1_epi8(16);
  __m256i qh = _mm256_setzero_si256();
  if constexpr (kFifthBit) qh = load_32(b + 16);
  for (int k = 4 * h; k < 4 * h + 4; ++k) {
    const __m256i chunk = load_32(qs + 32 * (k / 2));
    __m256i q = _mm256_and_si256(shift_right(chunk, 4 * (k & 1)), low4);
    if constexpr (kFifthBit) q = _mm256_or_si256(q, _mm256_and_si256(bit_set(qh, 1 << k), sixteen));
    int sc;
    int mn;
    scale_min_k4(scales, k, sc, mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    store_32<true>(w + 32 * (k - 4 * h), q, dl, ml, dl, ml);
  }
}

FERRY_AVX2 void q6_k_avx2(const Byte* b, int h, float* w) {
  const float d = half_at(b + 208);
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192) + 8 * h;
  const __m256i ql_first = load_32(b + 64 * h);
  const __m256i ql_second = load_32(b + 64 * h + 32);
  const __m256i qh = load_32(b + 128 + 32 * h);
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  // Output 32k + l: the low nibble (k < 2) or high nibble of ql[l + 32 (k % 2)], with bits
  // 2k, 2k + 1 of qh[l] as bits 4, 5; bits 4..5 are reached by shifting qh left 4, 2, 0, right 2.
  const __m256i codes[4] = {_mm256_or_si256(_mm256_and_si256(ql_first, low4),
                                            _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
                            _mm256_or_si256(_mm256_and_si256(ql_second, low4),
                                            _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_first, 4), low4),
                                            _mm256_and_si256(qh, bits45)),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_second, 4), low4),
                                            _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45))};
  const __m256i bias = _mm256_set1_epi8(32);
  for (int k = 0; k < 4; ++k) {
    store_32<false>(w + 32 * k, _mm256_sub_epi8(codes[k], bias),
                    d * static_cast<float>(scales[2 * k]), 0.0f,
                    d * static_cast<float>(scales[2 * k + 1]), 0.0f);
  }
}

#undef FERRY_AVX2

bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif

// Decodes granule `g` of a block (a legacy block is one granule, a K-quant block two).
using GranuleFn = void (*)(const Byte* block, int g, float* out);

template <void (*kWhole)(const Byte*, float*)>
void whole_block(const Byte* block, int, float* out) {
  kWhole(block, out);
}

struct Codec {
  GranuleFn fn = nullptr;
  int granule = 0;  // values per granule
};

// The AVX2 decoder of a K-quant, or null.
GranuleFn avx2_decoder(DType dtype) {
#if FERRY_QUANT_AVX2
  switch (dtype) {
    case DType::kQ2_K:
      return q2_k_avx2;
    case DType::kQ3_K:
      return q3_k_avx2;
    case DType::kQ4_K:
      return q45_k_avx2<false>;
    case DType::kQ5_K:
      return q45_k_avx2<true>;
    case DType::kQ6_K:
      return q6_k_avx2;
    default:
      return nullptr;
  }
#else
  (void)dtype;
  return nullptr;
#endif
}

Codec portable_codec(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
      return {whole_block<q8_0>, 32};
    case DType::kQ4_0:
      return {whole_block<q4_0>, 32};
    case DType::kQ4_1:
      return {whole_block<q4_1>, 32};
    case DType::kQ5_0:
      return {whole_block<q5_0>, 32};
    case DType::kQ5_1:
      return {whole_block<q5_1>, 32};
    case DType::kQ2_K:
      return {q2_k, 128};
    case DType::kQ3_K:
      return {q3_k, 128};
    case DType::kQ4_K:
      return {q45_k<false>, 128};
    case DType::kQ5_K:
      return {q45_k<true>, 128};
    case DType::kQ6_K:
      return {q6_k, 128};
    default:
      return {};
  }
}

Codec codec(DType dtype, DequantPath path) {
  Codec c = portable_codec(dtype);
  if (path == DequantPath::kAvx2) {
    if (const GranuleFn fast = avx2_decoder(dtype)) c.fn = fast;
  }
  return c;
}

DequantPath best_path() {
#if FERRY_QUANT_AVX2
  if (cpu_has_avx2()) return DequantPath::kAvx2;
#endif
  return DequantPath::kPortable;
}

bool plain_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

Codec require_codec(DType dtype, const char* op, DequantPath path = best_path()) {
  const Codec c = codec(dtype, path);
  if (c.fn == nullptr) {
    throw Error(ErrorCode::kInternal, std::string(op) + ": " + std::string(dtype_name(dtype)) +
                                          " is not a ggml block type");
  }
  return c;
}

// Granules [first, first + count) of a row of blocks, granule-aligned.
void decode_granules(DType dtype, const Codec& c, const Byte* row, std::int64_t first,
                     std::int64_t count, float* out) {
  const std::int64_t per_block = dtype_block_elems(dtype) / c.granule;
  const std::size_t bytes = dtype_block_bytes(dtype);
  for (std::int64_t g = first; g < first + count; ++g) {
    c.fn(row + static_cast<std::size_t>(g / per_block) * bytes, static_cast<int>(g % per_block),
         out + (g - first) * c.granule);
  }
}

}  // namespace

bool dequant_path_available(DequantPath path) {
  return path == DequantPath::kPortable || best_path() == path;
}

void dequantize(DType dtype, const void* blocks, float* out, std::int64_t count) {
  dequantize_on(best_path(), dtype, blocks, out, count);
}

void dequantize_on(DequantPath path, DType dtype, const void* blocks, float* out,
                   std::int64_t count) {
  if (count < 0) throw Error(ErrorCode::kInternal, "dequantize: negative count");
  if (plain_float(dtype)) {
    convert_to_f32(dtype, blocks, out, static_cast<std::size_t>(count));
    return;
  }
  if (!dequant_path_available(path)) {
    throw Error(ErrorCode::kInternal, "dequantize: this CPU or build has no such decoder path");
  }
  const Codec c = require_codec(dtype, "dequantize", path);
  if (count % dtype_block_elems(dtype) != 0) {
    throw Error(ErrorCode::kInternal, "dequantize: " + std::to_string(count) + " values of " +
                                          std::string(dtype_name(dtype)) + " are not whole blocks");
  }
  decode_granules(dtype, c, static_cast<const Byte*>(blocks), 0, count / c.granule, out);
}

std::int64_t dequantize_granule(DType dtype) {
  return plain_float(dtype) ? 1 : require_codec(dtype, "dequantize_granule").granule;
}

void dequantize_range(DType dtype, const void* row, std::int64_t first, float* out,
                      std::int64_t count) {
  if (first < 0 || count < 0) throw Error(ErrorCode::kInternal, "dequantize_range: negative range");
  const auto* bytes = static_cast<const Byte*>(row);
  if (plain_float(dtype)) {
    convert_to_f32(dtype, bytes + static_cast<std::size_t>(first) * dtype_size(dtype), out,
                   static_cast<std::size_t>(count));
    return;
  }
  const Codec c = require_codec(dtype, "dequantize_range");
  const std::int64_t g = c.granule;
  const std::int64_t end = first + count;
  // A partial granule at either end is decoded whole into a scratch and the part wanted copied.
  float scratch[128];
  std::int64_t at = first;
  if (at % g != 0 && at < end) {
    const std::int64_t granule = at / g;
    decode_granules(dtype, c, bytes, granule, 1, scratch);
    const std::int64_t take = std::min(end, (granule + 1) * g) - at;
    std::memcpy(out, scratch + (at - granule * g), static_cast<std::size_t>(take) * sizeof(float));
    at += take;
  }
  const std::int64_t whole = (end - at) / g;
  decode_granules(dtype, c, bytes, at / g, whole, out + (at - first));
  at += whole * g;
  if (at < end) {
    decode_granules(dtype, c, bytes, at / g, 1, scratch);
    std::memcpy(out + (at - first), scratch, static_cast<std::size_t>(end - at) * sizeof(float));
  }
}

namespace {

[[noreturn]] void bnb4_error(const std::string& what) {
  throw Error(ErrorCode::kInternal, "bitsandbytes 4-bit weight: " + what);
}

// Checks, once per call, that the state has what blocks [first_block, first_block + blocks)
// need (messages built only on failure: this runs once per packed panel run).
void check_bnb4_blocks(const Bnb4State& state, std::int64_t first_block, std::int64_t blocks) {
  if (first_block < 0 || blocks < 0 || first_block + blocks > state.absmax.numel()) {
    bnb4_error("blocks [" + std::to_string(first_block) + ", " +
               std::to_string(first_block + blocks) + ") lie outside its " +
               std::to_string(state.absmax.numel()) + " scales");
  }
  if (!state.nested()) {
    if (state.absmax.dtype != DType::kF32) bnb4_error("absmax is neither F32 nor U8");
    return;
  }
  if (state.nested_blocksize <= 0) bnb4_error("nested_blocksize is not positive");
  if (state.nested_code.dtype != DType::kF32 || state.nested_code.numel() != 256) {
    bnb4_error("nested_code is not F32[256]");
  }
  if (state.nested_absmax.dtype != DType::kF32) bnb4_error("nested_absmax is not F32");
  if (blocks > 0 &&
      (first_block + blocks - 1) / state.nested_blocksize >= state.nested_absmax.numel()) {
    bnb4_error("nested_absmax has " + std::to_string(state.nested_absmax.numel()) +
               " values for block " + std::to_string(first_block + blocks - 1));
  }
}

// The scale of one block, the state already checked.
float bnb4_scale(const Bnb4State& state, std::int64_t block) {
  if (!state.nested()) return state.absmax.as<const float>()[block];
  const std::uint8_t code = state.absmax.as<const Byte>()[block];
  return state.nested_code.as<const float>()[code] *
             state.nested_absmax.as<const float>()[block / state.nested_blocksize] +
         state.nested_offset;
}

}  // namespace

void bnb4_block_scales(const Bnb4State& state, std::int64_t first_block, std::int64_t blocks,
                       float* scales) {
  check_bnb4_blocks(state, first_block, blocks);
  for (std::int64_t i = 0; i < blocks; ++i) scales[i] = bnb4_scale(state, first_block + i);
}

void dequantize_bnb4(const Bnb4State& state, const std::uint8_t* codes, std::int64_t first,
                     float* out, std::int64_t count) {
  if (first < 0 || count < 0) bnb4_error("a negative range");
  if (state.blocksize <= 0) bnb4_error("blocksize is not positive");
  if (state.code.dtype != DType::kF32 || state.code.numel() != 16) {
    bnb4_error("the code book is not F32[16]");
  }
  if (count == 0) return;
  const std::int64_t bs = state.blocksize;
  const std::int64_t end = first + count;
  check_bnb4_blocks(state, first / bs, (end - 1) / bs - first / bs + 1);
  const float* book = state.code.as<const float>();
  std::int64_t j = first;
  while (j < end) {
    const std::int64_t block_end = std::min(end, (j / bs + 1) * bs);
    const float scale = bnb4_scale(state, j / bs);
    float* o = out + (j - first);
    if ((j & 1) != 0) {  // a range that starts on a low nibble
      *o++ = book[codes[j / 2] & 15] * scale;
      ++j;
    }
    // Whole bytes: the high nibble first.
    const Byte* pair = codes + j / 2;
    const std::int64_t pairs = (block_end - j) / 2;
    for (std::int64_t p = 0; p < pairs; ++p) {
      o[2 * p] = book[pair[p] >> 4] * scale;
      o[2 * p + 1] = book[pair[p] & 15] * scale;
    }
    j += 2 * pairs;
    if (j < block_end) {  // a range that ends on a high nibble
      out[j - first] = book[codes[j / 2] >> 4] * scale;
      ++j;
    }
  }
}

}  // namespace ferry::cpu
