// bitsandbytes 4-bit weights in a safetensors state dict (formats_lora_moe.md §2.2), as DiffSynth
// and Linear4bit._save_to_state_dict write them: `<p>.weight` holds the packed codes and
// `<p>.weight.quant_state.bitsandbytes__nf4` (or `__fp4`) a U8 tensor of JSON naming the
// quant type, block size, dtype, logical shape and, when double-quantised, the nested block size,
// dtype and offset; the scales and code books are the side tensors `<p>.weight.absmax`,
// `.quant_map`, `.nested_absmax`, `.nested_quant_map`.
//
// Grouping turns each such `<p>.weight` into one kBnb4 TensorInfo that carries its Bnb4Info; the
// side tensors stay ordinary entries. Its shape is [out, in] when every row is whole blocks (what
// the GEMMs take: every DiT and Qwen3-VL Linear); when blocks straddle rows (the H3 audio VAE's
// 32-wide Linears in DiffSynth's NF4 file) it is the flat [out · in], which no Linear accepts but
// which reads whole (dequantised at load; its quant state says [out, in]). A state that
// contradicts the file is Error(kBadModelFile); a valid state Ferry cannot hold (an odd element
// count) is Error(kUnsupported).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/tensor_info.h"

namespace ferry::io {

// A quant-state JSON tensor may be at most this long (real ones are under 250 bytes).
inline constexpr std::uint64_t kMaxBnb4QuantStateBytes = 64 * 1024;

inline constexpr std::string_view kBnb4QuantStateMarker = ".quant_state.bitsandbytes__";

// Parses one quant-state JSON. `suffix_type` is what the key names ("nf4" / "fp4"), `weight`
// the `<p>.weight` name (for messages and the side tensor names). Fills every field of the
// Bnb4Info; `out` and `in` receive the logical shape. Throws Error(kBadModelFile).
Bnb4Info parse_bnb4_quant_state(std::string_view json, std::string_view suffix_type,
                                std::string_view weight, std::string_view source,
                                std::uint64_t& out, std::uint64_t& in);

// Reads a tensor's bytes (at most kMaxBnb4QuantStateBytes; the caller checks the size first).
using TensorBytesReader = std::function<std::string(const TensorInfo&)>;

// Groups every bitsandbytes 4-bit weight among `tensors` (a safetensors file's, offset order
// kept). Throws Error(kBadModelFile) or Error(kUnsupported) naming the weight.
void group_bnb4_weights(std::vector<TensorInfo>& tensors, const TensorBytesReader& read,
                        std::string_view source);

}  // namespace ferry::io
