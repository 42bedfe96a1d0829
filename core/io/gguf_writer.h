// Writes GGUF v3 files (formats_lora_moe.md §1.1): key/value pairs of any type (arrays of
// strings, integers, floats and arrays), tensors of every dtype Ferry reads from GGUF, at a
// given alignment. Tests write reference-shaped files with it; benches and plan figures write
// multi-GB files whose data section is a sparse hole (reads as zeros, written instantly).
// The file appears under its name only when complete (written to "<name>.partial", renamed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/io/gguf.h"
#include "core/io/safetensors_writer.h"

namespace ferry::io {

struct GgufWriteOptions {
  // Written as `general.alignment` when not the default 32 (unless the metadata has it).
  std::uint64_t alignment = 32;
};

// Values for the metadata, typed as they will be stored.
GgufValue gguf_uint(GgufType type, std::uint64_t value);  // kU8 ... kU64, kBool
GgufValue gguf_int(GgufType type, std::int64_t value);    // kI8 ... kI64
GgufValue gguf_float(GgufType type, double value);        // kF32, kF64
GgufValue gguf_string(std::string value);
GgufValue gguf_string_array(std::vector<std::string> values);
GgufValue gguf_int_array(GgufType element_type, std::vector<std::int64_t> values);
GgufValue gguf_float_array(GgufType element_type, std::vector<double> values);
GgufValue gguf_array_array(std::vector<GgufValue> items);  // each item an array

// ggml's type id of a dtype Ferry reads from GGUF; nullopt for the others (F64, fp8, ints, BNB4).
std::optional<std::uint32_t> ggml_type_from_dtype(DType dtype);

// Bytes of a tensor stored in GGUF: dtype_storage_bytes of its elements. Throws
// Error(kBadArgument) when its rows (the last dimension) are not whole blocks.
std::uint64_t gguf_tensor_bytes(const TensorSpec& tensor);

// The file's bytes before the data section (header, key/values, tensor infos, padding), with
// tensor i at data offset sum_{j<i} align_up(bytes_j). Throws Error(kBadArgument) for a tensor
// GGUF cannot hold, an alignment that is not a power of two, or a `general.alignment` that
// disagrees with options.alignment.
std::vector<std::byte> gguf_header_bytes(const std::vector<GgufKeyValue>& metadata,
                                         const std::vector<TensorSpec>& tensors,
                                         const GgufWriteOptions& options = {});

// Writes the file. `fill` provides each tensor's bytes (as for write_safetensors); an empty
// `fill` leaves the whole data section a hole. Throws Error(kIo) when the file cannot be
// written (the partial file is removed), kBadArgument as gguf_header_bytes.
void write_gguf(const std::filesystem::path& path, const std::vector<GgufKeyValue>& metadata,
                const std::vector<TensorSpec>& tensors, const TensorFiller& fill,
                const GgufWriteOptions& options = {});

}  // namespace ferry::io
