// Synthetic Wan VAE checkpoints of the real shapes (wan.md §C.2, §C.3): the tensor list of the
// official Wan 2.1 / Wan 2.2 VAE files, for estimates, tests and benchmarks that need the real
// channel widths without the real file. A header-only file (its data section a sparse hole)
// opens like the real one and gives VaeWeights::shapes_only the real shapes at no disk cost.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/models/wan/vae_keys.h"

namespace ferry::models::wan {

// Every tensor of the official checkpoint (official names), encoder and decoder, in `dtype`.
std::vector<io::TensorSpec> wan_vae_tensor_specs(VaeKind kind, DType dtype = DType::kF16);

// The Wan 2.2 VAE's tensors at other base widths: encoder `dim` and decoder `dec_dim` (the
// official file: 160 and 256), z = 48, dim_mult [1, 2, 4, 4], two residual blocks per encoder
// stage and three per decoder stage (wan.md §C.3, §F.3). The demo model's VAE is this at 4 and 4.
std::vector<io::TensorSpec> wan22_vae_tensor_specs(std::uint64_t dim, std::uint64_t dec_dim,
                                                   DType dtype);

// Writes the safetensors header of `tensors` and extends the file to its full size without
// writing the data (a sparse hole on file systems that have them: the data reads as zeros).
void write_header_only_safetensors(const std::filesystem::path& path,
                                   const std::vector<io::TensorSpec>& tensors);

}  // namespace ferry::models::wan
