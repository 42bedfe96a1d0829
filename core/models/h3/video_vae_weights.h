// The tensors of H3's video VAE (minimax_h3.md §E, §G) in a checkpoint: which names the file uses,
// the configuration its shapes imply, and the layer groups the offload engine plans the ViT
// decoder with. Files read:
//   - diffusers' names (the release's vae/ folder, f32): decoder.proj_in, transformer_blocks.B.
//     attn.to_{q,k,v}, attn.to_out.0, ff.net.0.proj [value; gate], ff.net.2, encoder.down_blocks.L.
//     resnets.M.{…, conv_shortcut}, encoder.down_blocks.L.downsamplers.0.conv;
//   - the official names (MiniMaxAI's FL2VA/video_vae/source, f32; Comfy-Org's f16 file):
//     decoder.x_embedder, attn.to_qkv fused with per-head interleaved rows [heads][q,k,v][D],
//     attn.to_out, ff.w1 [gate; value], ff.w2, encoder.down.L.block.M.{…, nin_shortcut},
//     encoder.down.L.downsample.conv;
//   - DiffSynth's video_vae_nf4: the official names with ".weight" after register_tokens, scale1
//     and scale2, the decoder Linears but x_embedder bitsandbytes NF4 (their side tensors travel in
//     the group), everything else bf16.
// A file may hold the decoder alone (config().has_encoder false).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/models/weight_scaling.h"
#include "core/offload/layer_group.h"

namespace ferry::models::h3::vae {

// The chunk geometry every H3 video VAE shares (§E.4: clip 17, token drop 3, ×4 in time).
inline constexpr std::int64_t kTemporalRatio = 4;
inline constexpr std::int64_t kChunkLatents = 5;         // latents a chunk advances
inline constexpr std::int64_t kChunkOverlapLatents = 2;  // latents a chunk reads beyond them
inline constexpr std::int64_t kChunkPrePadding = 3;      // leading frames of a chunk dropped
inline constexpr std::int64_t kChunkMainFrames = 17;     // frames a chunk hands out
inline constexpr std::int64_t kChunkOverlapFrames = 5;   // frames blended into the next chunk

struct VideoVaeConfig {
  std::int64_t latent_channels = 0;  // 24
  std::int64_t dim = 0;              // decoder width (2048)
  std::int64_t heads = 0;            // 32
  std::int64_t head_dim = 0;         // 64
  std::int64_t ffn = 0;              // SwiGLU width (8192)
  std::int64_t layers = 0;           // decoder blocks (36)
  std::int64_t registers = 0;        // learned register tokens (4)
  std::int64_t patch = 0;            // pixels per latent position, each axis (16)
  float rope_theta = 100.0f;
  float eps = 1e-5f;         // RMSNorms and the final LayerNorm
  bool has_encoder = false;  // the file holds the encoder too (video_vae_encoder.h)
  // The per-channel latent statistics (§E.1): the release's for 24 channels, else 0 and 1 until
  // set_latent_stats.
  std::vector<float> latents_mean, latents_std;

  std::int64_t inner() const { return heads * head_dim; }
  // Rotated dims per head: int(0.75·head_dim), 3 axes × (cos, sin halves) of equal frequencies.
  std::int64_t rotary_dims() const { return head_dim * 3 / 4; }
  std::int64_t rope_freqs() const { return rotary_dims() / 6; }
  std::int64_t patch_values() const { return 3 * kTemporalRatio * patch * patch; }
};

enum class VaeKeyLayout {
  kDiffusers,  // decoder.proj_in, to_q/to_k/to_v, ff.net.*
  kOriginal,   // decoder.x_embedder, to_qkv interleaved, ff.w1/w2 (official, Comfy-Org)
  kDiffSynth,  // kOriginal with ".weight" after register_tokens, scale1, scale2
};

// A decoder block's tensors in the order the forward reads them; a fused file has its
// [3·inner, dim] weight at kQ (bias at kQBias) and no kK, kV.
enum BlockTensor : std::size_t {
  kNorm1,
  kQ,
  kQBias,
  kK,
  kKBias,
  kV,
  kVBias,
  kOut,
  kOutBias,
  kScale1,
  kNorm2,
  kW1,
  kW1Bias,
  kW2,
  kW2Bias,
  kScale2,
  kBlockTensorCount
};

// The decoder's resident tensors: the embedding group, then the head group.
enum OuterTensor : std::size_t {
  kPostQuantWeight,
  kPostQuantBias,
  kProjInWeight,
  kProjInBias,
  kRegisters,
  kNormOutWeight,
  kNormOutBias,
  kProjOutWeight,
  kProjOutBias,
  kOuterTensorCount
};

bool is_linear(BlockTensor t);

// Where each tensor of a group is among its LayerGroup::weights (-1: absent) and what scales
// each Linear.
struct GroupIndex {
  std::vector<int> at;
  std::vector<WeightScalingSource> scaling;
};

class VideoVaeWeights {
 public:
  // Recognises the names, infers the configuration from the shapes and checks every decoder
  // tensor (and the encoder's, when present). Error(kBadModelFile) when the file is not an H3
  // video VAE or a shape disagrees, Error(kMissingTensor) naming the first absent tensor. `set`
  // must outlive this.
  static VideoVaeWeights from(const io::TensorSet& set);

  const VideoVaeConfig& config() const { return config_; }
  VaeKeyLayout key_layout() const { return layout_; }
  bool fused_qkv() const { return layout_ != VaeKeyLayout::kDiffusers; }
  // ff's first half is the gate (official files) or the value (diffusers).
  bool gate_first() const { return layout_ != VaeKeyLayout::kDiffusers; }
  const io::TensorSet& set() const { return *set_; }
  // The heads' width is not in the weights: 64 (the release's) when it divides the attention
  // width, else 0 until set. Error(kBadArgument) unless it divides it and 3/4 of it is a multiple
  // of 6 (whole frequencies per axis).
  void set_head_dim(std::int64_t head_dim);
  // Error(kBadArgument) unless both hold latent_channels values, every std > 0.
  void set_latent_stats(std::vector<float> mean, std::vector<float> std);

  // The decoder's groups: "decoder.embed" (post_quant_conv, proj_in, registers; resident),
  // "decoder.blocks.i", "decoder.head" (norm_out, proj_out; resident).
  std::size_t group_count() const { return groups_.size(); }
  static constexpr std::size_t kEmbedGroup = 0;
  std::size_t block_group(std::int64_t i) const { return 1 + static_cast<std::size_t>(i); }
  std::size_t head_group() const { return groups_.size() - 1; }
  const GroupIndex& index(std::size_t group) const { return index_.at(group); }
  const offload::LayerGroup& group(std::size_t g) const { return groups_.at(g); }
  const std::vector<offload::LayerGroup>& groups() const { return groups_; }

  // The decoder's bytes in the file (what the decode stage streams or keeps resident).
  std::uint64_t decoder_bytes() const;
  // The encoder's and quant_conv's bytes in the file (0 without an encoder).
  std::uint64_t encoder_bytes() const;

  // The file name of a decoder tensor (empty when the layout has none: kK in a fused file).
  std::string block_tensor_name(std::int64_t i, BlockTensor t) const;
  std::string outer_tensor_name(OuterTensor t) const;

 private:
  VideoVaeWeights() = default;

  const io::TensorSet* set_ = nullptr;
  VideoVaeConfig config_;
  VaeKeyLayout layout_ = VaeKeyLayout::kDiffusers;
  std::int64_t inner_ = 0;  // the attention width
  std::vector<offload::LayerGroup> groups_;
  std::vector<GroupIndex> index_;
};

// The release's latent statistics (§E.1), 24 values each.
const std::vector<float>& release_latents_mean();
const std::vector<float>& release_latents_std();

}  // namespace ferry::models::h3::vae
