// Element types as stored in model files, with their sizes and names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry {

enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  // Block-quantised weights (ggml / GGUF, formats_lora_moe.md §1.2): a row of K values is
  // K / dtype_block_elems blocks of dtype_block_bytes each, every block carrying its own scales.
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_0,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  // bitsandbytes 4-bit codes (NF4 or FP4, formats_lora_moe.md §2): two codes per byte, the first
  // in the high nibble, over the row-major [out, in] weight. The code book and the per-block
  // scales are separate tensors (Bnb4State, core/tensor/quant.h).
  kBnb4,
};

// Bytes of one element. Error(kInternal) for a block type, whose elements have no size of their
// own: use dtype_storage_bytes.
std::size_t dtype_size(DType dtype);

// True for the block-quantised types above (kQ*, kBnb4).
bool dtype_is_blocked(DType dtype);
// Elements per block and bytes per block: 1 and dtype_size(dtype) for an element type.
std::int64_t dtype_block_elems(DType dtype);
std::size_t dtype_block_bytes(DType dtype);
// Bytes of `count` values stored as `dtype`. `count` must be a whole number of blocks
// (Error(kInternal) otherwise: a tensor's row length is checked against its blocks when it is
// read from a file).
std::uint64_t dtype_storage_bytes(DType dtype, std::uint64_t count);

// The safetensors spelling ("F32", "BF16", "F8_E4M3", ...); ggml's for the block types ("Q4_K",
// "Q8_0") and "BNB4" for bitsandbytes codes.
std::string_view dtype_name(DType dtype);

// Parses a safetensors dtype name; nullopt for anything else, block types included (a
// safetensors header never names one).
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace ferry
