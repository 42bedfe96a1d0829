// The Wan DiT's tensors as the official checkpoints name and shape them (wan.md §B.1, §F.1),
// for a configuration. Used to write synthetic checkpoints (benchmarks, the demo) and, later,
// to check a real checkpoint against the configuration inferred from it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/io/safetensors_writer.h"
#include "core/tensor/dtype.h"

namespace ferry::models::wan {

struct DitConfig {
  std::string_view name;
  std::uint64_t dim = 0;       // D
  std::uint64_t ffn_dim = 0;   // F
  std::uint64_t layers = 0;
  std::uint64_t in_dim = 0;    // latent channels in
  std::uint64_t out_dim = 0;   // latent channels out
  std::uint64_t text_dim = 4096;
  std::uint64_t freq_dim = 256;
};

inline constexpr DitConfig kT2V_1_3B{"t2v-1.3b", 1536, 8960, 30, 16, 16};
inline constexpr DitConfig kTI2V_5B{"ti2v-5b", 3072, 14336, 30, 48, 48};
inline constexpr DitConfig kT2V_14B{"t2v-14b", 5120, 13824, 40, 16, 16};

// nullptr for an unknown name.
const DitConfig* find_dit_config(std::string_view name);

// Every tensor of block `index`, in the order the official model registers them.
std::vector<io::TensorSpec> dit_block_tensors(const DitConfig& config, std::uint64_t index,
                                              DType dtype);

// The whole checkpoint: embeddings, then blocks 0..layers-1, then the head.
std::vector<io::TensorSpec> dit_tensors(const DitConfig& config, DType dtype);

}  // namespace ferry::models::wan
