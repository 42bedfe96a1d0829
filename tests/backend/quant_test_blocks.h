// Quantised weights for the dequantisation tests (the CPU's cpu_quant_linear_test.cpp; CUDA's
// quant_host_test.cpp on any machine, quant_parity_test.cpp on a GPU): random ggml blocks whose
// f16 scale fields hold finite halves (formats_lora_moe.md §1.6, recipe 1), hand-made edge
// blocks, and bitsandbytes 4-bit states.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/tensor/dtype.h"

namespace ferry::test {

inline constexpr DType kBlockTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                        DType::kQ8_0, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                                        DType::kQ5_K, DType::kQ6_K};

// Byte offsets of a block's f16 fields (d, then m or dmin), per §1.2's layouts.
inline std::vector<int> half_fields(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
      return {0};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

inline void put_half(std::uint8_t* at, std::uint16_t h) {
  at[0] = static_cast<std::uint8_t>(h & 0xFF);
  at[1] = static_cast<std::uint8_t>(h >> 8);
}

// Any finite half: a random bit pattern whose exponent is not all ones (normals of every
// magnitude, subnormals, ±0), so no scale is Inf or NaN.
inline std::uint16_t random_finite_half(std::mt19937& rng) {
  auto h = static_cast<std::uint16_t>(rng());
  if ((h & 0x7C00) == 0x7C00) h = static_cast<std::uint16_t>(h & ~0x4000);
  return h;
}

// A half of moderate size (|h| in [2^-10, 2^-5), either sign): weights of order 0.01–1, as a
// model's, for the linear tests.
inline std::uint16_t random_moderate_half(std::mt19937& rng) {
  const auto exponent = static_cast<std::uint16_t>(5 + rng() % 5);  // biased 5..9
  const auto mantissa = static_cast<std::uint16_t>(rng() & 0x3FF);
  const auto sign = static_cast<std::uint16_t>((rng() & 1) << 15);
  return static_cast<std::uint16_t>(sign | (exponent << 10) | mantissa);
}

// `blocks` random blocks of t; moderate: scales from random_moderate_half, else any finite half.
inline std::vector<std::uint8_t> random_blocks(DType t, std::int64_t blocks, std::uint32_t seed,
                                               bool moderate = false) {
  std::mt19937 rng(seed);
  const std::size_t size = dtype_block_bytes(t);
  std::vector<std::uint8_t> bytes(size * static_cast<std::size_t>(blocks));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (std::int64_t i = 0; i < blocks; ++i) {
    std::uint8_t* block = bytes.data() + static_cast<std::size_t>(i) * size;
    for (int field : half_fields(t))
      put_half(block + field, moderate ? random_moderate_half(rng) : random_finite_half(rng));
  }
  return bytes;
}

// Edge blocks of t: every byte pattern of {0x00, 0xFF, 0x55, 0xAA, random} (all nibbles, 6-bit
// scales, high bits and Q3_K hmask bits at their extremes and alternating) with every f16 field
// set to each edge half (±0, the smallest and largest subnormals, the smallest normal, ±1, ±the
// largest finite), and the second field (m, dmin) of the opposite sign.
inline std::vector<std::uint8_t> edge_blocks(DType t, std::uint32_t seed) {
  const std::uint16_t halves[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF,
                                  0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF};
  const int patterns[] = {0x00, 0xFF, 0x55, 0xAA, -1};
  std::mt19937 rng(seed);
  const std::size_t size = dtype_block_bytes(t);
  std::vector<std::uint8_t> bytes;
  for (const int pattern : patterns) {
    for (const std::uint16_t h : halves) {
      std::vector<std::uint8_t> block(size);
      for (auto& b : block)
        b = static_cast<std::uint8_t>(pattern < 0 ? rng() : static_cast<unsigned>(pattern));
      const std::vector<int> fields = half_fields(t);
      for (std::size_t f = 0; f < fields.size(); ++f)
        put_half(block.data() + fields[f], f == 0 ? h : static_cast<std::uint16_t>(h ^ 0x8000));
      bytes.insert(bytes.end(), block.begin(), block.end());
    }
  }
  return bytes;
}

// A bitsandbytes 4-bit weight in host memory: codes and the state's arrays.
struct Bnb4Host {
  std::vector<std::uint8_t> codes;      // ceil(count / 2) bytes
  std::vector<float> absmax_f32;        // plain
  std::vector<std::uint8_t> absmax_u8;  // nested
  std::vector<float> code;              // 16
  std::vector<float> nested_absmax;     // nested
  std::vector<float> nested_code;       // nested: 256
  float nested_offset = 0.0f;
  std::int64_t count = 0, blocksize = 64, nested_blocksize = 256;
  bool nested = false;
  std::int64_t blocks() const { return (count + blocksize - 1) / blocksize; }
};

// bitsandbytes' NF4 code book and its FP4 one (formats_lora_moe.md §2.3), in code order.
inline std::vector<float> nf4_code() {
  return {-1.0f,
          -0.6961928009986877f,
          -0.5250730514526367f,
          -0.39491748809814453f,
          -0.28444138169288635f,
          -0.18477343022823334f,
          -0.09105003625154495f,
          0.0f,
          0.07958029955625534f,
          0.16093020141124725f,
          0.24611230194568634f,
          0.33791524171829224f,
          0.44070982933044434f,
          0.5626170039176941f,
          0.7229568362236023f,
          1.0f};
}
inline std::vector<float> fp4_code() {
  const float table[] = {0, 0.0625f, 8, 12, 4, 6, 2, 3, -0.0f, -0.0625f, -8, -12, -4, -6, -2, -3};
  std::vector<float> code;
  for (float v : table) code.push_back(v / 12.0f);
  return code;
}

// `count` random codes (a partial last block when count is not a multiple of 64) with random
// scales: plain f32 absmax in [0, 2) with a zero and a subnormal among them, or nested u8 codes
// into a random 256-entry map with random nested absmax and offset.
inline Bnb4Host random_bnb4(std::int64_t count, bool nested, bool nf4, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  Bnb4Host h;
  h.count = count;
  h.nested = nested;
  h.code = nf4 ? nf4_code() : fp4_code();
  h.codes.resize(static_cast<std::size_t>((count + 1) / 2));
  for (auto& b : h.codes) b = static_cast<std::uint8_t>(rng());
  const std::int64_t blocks = h.blocks();
  if (!nested) {
    for (std::int64_t b = 0; b < blocks; ++b) h.absmax_f32.push_back(unit(rng) + 1.0f);
    h.absmax_f32[0] = 0.0f;
    if (blocks > 1) h.absmax_f32[1] = 1e-40f;  // subnormal
    return h;
  }
  for (std::int64_t b = 0; b < blocks; ++b) h.absmax_u8.push_back(static_cast<std::uint8_t>(rng()));
  for (std::int64_t b = 0; b < (blocks + h.nested_blocksize - 1) / h.nested_blocksize; ++b)
    h.nested_absmax.push_back(unit(rng) * 0.1f + 0.2f);
  for (int i = 0; i < 256; ++i) h.nested_code.push_back(unit(rng));
  h.nested_offset = 0.05166400969028473f;
  return h;
}

}  // namespace ferry::test
