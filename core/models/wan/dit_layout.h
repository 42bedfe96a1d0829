// The Wan DiT's tensors as the official checkpoints name and shape them (wan.md §B.1, §F.1),
// for a configuration. Used to write synthetic checkpoints (benchmarks, the demo) and, later,
// to check a real checkpoint against the configuration inferred from it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/io/safetensors_writer.h"
#include "core/offload/layer_group.h"
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

// Every Wan DiT: attention heads of 128 channels, the text context padded to 512 rows.
inline constexpr std::uint64_t kDitHeadDim = 128;
inline constexpr std::int64_t kDitTextLen = 512;

inline constexpr DitConfig kT2V_1_3B{"t2v-1.3b", 1536, 8960, 30, 16, 16};
inline constexpr DitConfig kTI2V_5B{"ti2v-5b", 3072, 14336, 30, 48, 48};
inline constexpr DitConfig kT2V_14B{"t2v-14b", 5120, 13824, 40, 16, 16};
// Wan 2.2 A14B: two experts of the 14B shape each (formats_lora_moe.md §6.1). T2V's experts are
// kT2V_14B's shape (a model set of two is named t2v-a14b); I2V's take 36 channels in (the noisy
// latent, a 4-channel mask, the conditioning video's latent) and give 16 out, without CLIP.
inline constexpr DitConfig kT2V_A14B{"t2v-a14b", 5120, 13824, 40, 16, 16};
inline constexpr DitConfig kI2V_A14B{"i2v-a14b", 5120, 13824, 40, 36, 16};

// nullptr for an unknown name.
const DitConfig* find_dit_config(std::string_view name);

// Every tensor of block `index`, in the order the official model registers them.
std::vector<io::TensorSpec> dit_block_tensors(const DitConfig& config, std::uint64_t index,
                                              DType dtype);

// The whole checkpoint: embeddings, then blocks 0..layers-1, then the head.
std::vector<io::TensorSpec> dit_tensors(const DitConfig& config, DType dtype);

// A LoRA of `rank` on every block Linear of `config`, official names with the
// `diffusion_model.` prefix: `lora_down.weight` [rank, in] and `lora_up.weight` [out, rank] in
// `dtype`, and an F32 scalar `alpha` each (synthetic LoRAs: ferry-cli synth, benchmarks).
std::vector<io::TensorSpec> dit_lora_tensors(const DitConfig& config, std::uint64_t rank,
                                             DType dtype);

// The configuration a checkpoint's shapes imply (wan.md §F.1: D, C_in, F, layers, C_out, and
// the text and frequency widths the embeddings take), with or without ComfyUI's
// "model.diffusion_model." prefix, in the official or the diffusers layout. Error(kBadModelFile) when the files are
// not a Wan DiT in the official key layout.
DitConfig infer_dit_config(const io::TensorSet& set);

// Tokens of one DiT pass for a video: latent frames (F-1)/4+1, latent pixels at the VAE's
// stride (16 for the 48-channel Wan 2.2 latent, 8 otherwise), then the 2×2 patch.
std::int64_t dit_tokens(const DitConfig& config, int width, int height, int frames);

// Working memory of one WanDit::forward at `tokens` (wan.md §E, the lean set), in bytes of its
// arena: for each of `branches` contexts run through each block together (CFG: 2), an f32
// residual stream and the 512-row context; the time embedding for up to `distinct_timesteps`
// timestep values (never per token); and the largest of the phases' temporaries (a block's:
// the self-attention's keys and values of every token, and one chunk's working tensors, the
// block's per-token work done in chunks of chunk_tokens when > 0; the embeddings' and the
// head's). Measured, not modelled: the forward's own code runs on the shapes-only backend
// (WanDit::measure_activation_bytes) and this is its arena's peak, alignment included.
// With LoRAs (lora_rank > 0: WanDit::lora_scratch_rank), their scratch too.
std::uint64_t dit_activation_bytes(const DitConfig& config, std::int64_t tokens,
                                   std::int64_t chunk_tokens, std::int64_t branches = 2,
                                   std::int64_t distinct_timesteps = 2, std::int64_t lora_rank = 0);

// The layout the offload engine plans with: "embeddings" and "head" always resident, one group
// per block in between; its activation_bytes are those of a CFG forward (two contexts) with up to
// two distinct timesteps (TI2V: 0 on the image frame, t elsewhere).
offload::ModelLayout dit_model_layout(const io::TensorSet& set, int width, int height, int frames,
                                      std::int64_t chunk_tokens);

}  // namespace ferry::models::wan
