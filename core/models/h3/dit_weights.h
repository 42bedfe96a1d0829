// The tensors of H3's DiT (minimax_h3.md §C.1, §C.9–C.11, §G) in a checkpoint: which names and
// QKV row layout the file uses, the configuration its shapes imply, and the layout the offload
// engine plans with. Files read:
//   - the release's diffusers folder (transformer/): transformer_blocks.i.attn.to_{q,k,v},
//     ff.net.0.proj [value; gate], time_embedder.linear_{1,2}; bf16 with f32 islands;
//   - original names (MiniMaxAI's FL2VA/transformer shards, Comfy-Org, DiffSynth NF4):
//     blocks.i.attn.qkv_proj fused, mlp.fc1 [gate; value], video_patch_proj, condition_proj,
//     final_layer.*; the QKV rows per-head interleaved [heads][q,k,v][D] in MiniMaxAI's and
//     DiffSynth's full files, stacked [q|k|v] in Comfy-Org's and every pruned file (§C.9: the
//     shapes are the same, so the family decides; from() guesses, a caller may say);
//   - the pruned "AdaLN-curve" variant (§C.10): adaln_t_table [1025, 8], AdaLN projections of 8
//     inputs, no time MLP;
//   - any of these with every name behind "model.diffusion_model." (ComfyUI saves).
// Linears may be float, scaled fp8 or bitsandbytes NF4 (their side tensors travel in the group).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/models/weight_scaling.h"
#include "core/offload/layer_group.h"

namespace ferry::models::h3::dit {

struct DitConfig {
  std::int64_t hidden = 0;          // residual width (5376)
  std::int64_t heads = 0;           // 56
  std::int64_t head_dim = 0;        // 128
  std::int64_t ffn = 0;             // SwiGLU width (14336)
  std::int64_t layers = 0;          // blocks (50)
  std::int64_t refiner_layers = 0;  // token refiner blocks (2)
  std::int64_t patch_dim = 0;       // video row width: channels · 2 · 2 (96)
  std::int64_t audio_channels = 0;  // audio row width (32)
  std::int64_t text_dim = 0;        // conditioner width (5120)
  std::int64_t freq_dim = 0;        // sinusoid width (256; 0 when pruned)
  std::int64_t time_hidden = 0;     // time MLP width (5376; 0 when pruned)
  std::int64_t time_dim = 0;        // AdaLN input width: 2688, or the curve table's 8 when pruned
  bool pruned = false;
  std::int64_t curve_rows = 0;  // adaln_t_table rows (1025) when pruned
  // Not in diffusers' weights (rope.inv_freq is in the original files): 16 for the release.
  std::int64_t rope_freq_dim = 16;
  float rope_theta = 10000.0f;
  float eps = 1e-5f;  // every RMSNorm

  std::int64_t inner() const { return heads * head_dim; }
  std::int64_t rotary_dims() const { return 6 * rope_freq_dim; }
  std::int64_t modulation_width() const { return 6 * kModalityRows * hidden; }
  static constexpr std::int64_t kModalityRows = 3;
};

enum class DitKeyLayout {
  kDiffusers,  // transformer_blocks.i.*, separate to_q/to_k/to_v
  kOriginal,   // blocks.i.*, fused qkv_proj
};

enum class QkvLayout {
  kSplit,        // diffusers: three Linears
  kInterleaved,  // fused rows [heads][q, k, v][head_dim]
  kStacked,      // fused rows [q | k | v], each [heads][head_dim]
};

// The tensors of a block (and of a refiner block, which has no AdaLN), in the order the forward
// reads them; a fused file has its [3·inner, hidden] weight at kQ and no kK, kV.
enum BlockTensor : std::size_t {
  kNorm1,
  kQ,
  kK,
  kV,
  kQNorm,
  kKNorm,
  kOut,
  kNorm2,
  kFc1,
  kFc2,
  kAdaWeight,
  kAdaBias,
  kBlockTensorCount
};

// The always-resident groups' tensors.
enum OuterTensor : std::size_t {
  kVideoInWeight,
  kVideoInBias,
  kAudioInWeight,
  kAudioInBias,
  kTextInWeight,
  kTextInBias,
  kTime1Weight,  // full files
  kTime1Bias,
  kTime2Weight,
  kTime2Bias,
  kCurveTable,  // pruned files
  kRefinerNorm,
  kFinalNorm,
  kFinalAdaWeight,
  kFinalAdaBias,
  kVideoOutWeight,
  kVideoOutBias,
  kAudioOutWeight,
  kAudioOutBias,
  kOuterTensorCount
};

bool is_linear(BlockTensor t);

// The prefix ComfyUI saves put before a diffusion model's names (DiffSynth strips it too).
inline constexpr const char* kComfyPrefix = "model.diffusion_model.";

// Where each tensor of a group is among its LayerGroup::weights (-1: absent) and what scales each
// Linear.
struct GroupIndex {
  std::vector<int> at;
  std::vector<WeightScalingSource> scaling;
};

class DitWeights {
 public:
  // Recognises the names, infers the configuration from the shapes and checks every tensor.
  // `qkv`: kSplit for diffusers' names; for original names the row layout of qkv_proj, or kSplit
  // to guess it (stacked for pruned files and Comfy-Org's quantized ones, interleaved
  // otherwise). Error(kBadModelFile) when the file is not an H3 DiT or a shape disagrees,
  // Error(kMissingTensor) naming the first absent tensor, Error(kUnsupported) for int8 weights.
  // `set` must outlive this.
  static DitWeights from(const io::TensorSet& set, QkvLayout qkv = QkvLayout::kSplit);

  const DitConfig& config() const { return config_; }
  DitKeyLayout key_layout() const { return layout_; }
  // What every name starts with: "" or kComfyPrefix.
  const std::string& name_prefix() const { return prefix_; }
  QkvLayout qkv_layout() const { return qkv_; }
  // fc1's first half is the gate (original files) or the value (diffusers).
  bool gate_first() const { return layout_ == DitKeyLayout::kOriginal; }
  // The rotary frequencies per axis are not in diffusers' weights (16 in the release).
  void set_rope_freq_dim(std::int64_t n);
  const io::TensorSet& set() const { return *set_; }

  // Groups: "embeddings" (patch and text projections, the time MLP or curve table; always
  // resident), "refiner.j", "refiner.norm" (its final norm; always resident), "blocks.i", "head"
  // (final norm, its AdaLN, the two output heads; always resident).
  std::size_t group_count() const { return groups_.size(); }
  static constexpr std::size_t kEmbeddingsGroup = 0;
  std::size_t refiner_group(std::int64_t j) const { return 1 + static_cast<std::size_t>(j); }
  std::size_t refiner_norm_group() const {
    return 1 + static_cast<std::size_t>(config_.refiner_layers);
  }
  std::size_t block_group(std::int64_t i) const {
    return 2 + static_cast<std::size_t>(config_.refiner_layers + i);
  }
  std::size_t head_group() const { return groups_.size() - 1; }
  const GroupIndex& index(std::size_t group) const { return index_.at(group); }
  const offload::LayerGroup& group(std::size_t g) const { return groups_.at(g); }

  // Device memory of one forward over `tokens` rows of which `text_rows` text, with token chunks
  // of `chunk_tokens` (0: all at once) and up to `distinct_timesteps` values: exactly what
  // forward() allocates (its arena peak equals it).
  // `lora_rank` > 0: with runtime LoRA terms of up to that rank (their scratch, dit.h).
  std::uint64_t activation_bytes(std::int64_t tokens, std::int64_t text_rows,
                                 std::int64_t chunk_tokens, std::int64_t distinct_timesteps,
                                 std::int64_t lora_rank = 0) const;
  offload::ModelLayout model_layout(std::int64_t tokens, std::int64_t text_rows,
                                    std::int64_t chunk_tokens) const;

 private:
  DitWeights() = default;

  const io::TensorSet* set_ = nullptr;
  DitConfig config_;
  DitKeyLayout layout_ = DitKeyLayout::kDiffusers;
  QkvLayout qkv_ = QkvLayout::kSplit;
  std::string prefix_;  // before every name: "" or kComfyPrefix
  std::vector<offload::LayerGroup> groups_;
  std::vector<GroupIndex> index_;
};

// The device memory of one forward of a model of configuration `c` (dit_forward's arena: the
// residual stream, rotary tables and AdaLN inputs through the pass; per block its modulation rows,
// q, k and v of every row and one token chunk's working tensors), for `tokens` rows of which
// `text_rows` text, chunks of `chunk_tokens` (0: all rows at once), `distinct_timesteps` values.
// `fused_qkv`: the file's QKV is one Linear (its chunk-sized output is held before the split).
// `lora_rank` > 0: runtime LoRA terms of up to that rank, whose scratch is held through the pass
// (A·x for the most rows a Linear takes, and a fused QKV term's up reordered).
std::uint64_t dit_activation_bytes(const DitConfig& c, bool fused_qkv, std::int64_t tokens,
                                   std::int64_t text_rows, std::int64_t chunk_tokens,
                                   std::int64_t distinct_timesteps, std::int64_t lora_rank = 0);

// The file name of a block tensor ("blocks.3.attn.qkv_proj.weight"); empty when the layout has
// none (kK in a fused file, AdaLN in a refiner block).
std::string block_tensor_name(DitKeyLayout layout, bool refiner, std::int64_t i, BlockTensor t);
std::string outer_tensor_name(DitKeyLayout layout, OuterTensor t);

}  // namespace ferry::models::h3::dit
