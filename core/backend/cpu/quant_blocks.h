// Dequantisation of block-quantised weights to f32 on the host: ggml's blocks (GGUF files,
// formats_lora_moe.md §1.2) and bitsandbytes' 4-bit codes (§2.4). This is the exact oracle: the
// CPU backend's GEMM dequantises its weight panels with it, and the CUDA kernels are tested
// against it. Results are bit-exact with ggml's dequantize_row_* and gguf-py's
// gguf.quants.dequantize (same association of the f32 arithmetic, no FMA contraction: the .cpp is
// compiled with -ffp-contract=off).
#pragma once

#include <cstdint>

#include "core/tensor/dtype.h"
#include "core/tensor/quant.h"

namespace ferry::cpu {

// Dequantises `count` values (a whole number of blocks) of a ggml block type, or F32/F16/BF16, to
// f32, bit-exact with ggml's dequantize_row_* and gguf-py (formats_lora_moe.md §1.2). `blocks`
// may have any alignment. Error(kInternal) for another dtype or a count that is not whole blocks.
void dequantize(DType dtype, const void* blocks, float* out, std::int64_t count);

// The decoders' instruction-set paths: the portable C++ one, everywhere, and for the K-quants an
// AVX2 one (GCC or Clang on x86-64 outside Windows, on a CPU that has AVX2). dequantize and
// dequantize_range take the widest the CPU runs; the tests hold the paths to each other bit for
// bit through dequantize_on, which throws Error(kInternal) for a path that is not available.
enum class DequantPath { kPortable, kAvx2 };
bool dequant_path_available(DequantPath path);
void dequantize_on(DequantPath path, DType dtype, const void* blocks, float* out,
                   std::int64_t count);

// The GEMM's view of a row of blocks (a weight row of K values, K a whole number of blocks):
// the fewest values a block's decoding splits into (128 for the K-quants, whose halves decode on
// their own; the block for the legacy types; 1 for F32/F16/BF16), and values [first, first +
// count) of the row starting at `row`, any range (a partial granule at either end is decoded
// whole and cut), bit-exact with dequantize.
std::int64_t dequantize_granule(DType dtype);
void dequantize_range(DType dtype, const void* row, std::int64_t first, float* out,
                      std::int64_t count);

// Values [first, first + count) of a bitsandbytes 4-bit weight (host memory), to f32: value j is
// code[c_j] · scale[j / blocksize] over the row-major flattened weight (Bnb4State), c_j the high
// nibble of codes[j / 2] for even j, the low one for odd j. The f32 values before bitsandbytes
// casts them to the model's dtype. Error(kInternal) when the state's tensors do not have the
// dtypes and sizes Bnb4State documents for the blocks the range touches.
void dequantize_bnb4(const Bnb4State& state, const std::uint8_t* codes, std::int64_t first,
                     float* out, std::int64_t count);

// The f32 scale of every bitsandbytes block in [first_block, first_block + blocks): absmax
// resolved through the nested map when the state is nested. dequantize_bnb4 uses it; the GEMM
// resolves a panel's scales once with it.
void bnb4_block_scales(const Bnb4State& state, std::int64_t first_block, std::int64_t blocks,
                       float* scales);

}  // namespace ferry::cpu
