// The tensors of H3's vision tower, Qwen3-VL's ViT (minimax_h3.md §B.4, §G), in a checkpoint:
// which prefix the file uses (model.visual.* in the release and DiffSynth's NF4 file, whose tower
// is bf16; visual.* in ComfyUI's text encoder), the configuration its shapes imply, and the layout
// the offload engine plans with. Not in the weights, from config.json: the head count (16 heads of
// 72) and the blocks after which the DeepStack mergers read (8, 16, 24).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/io/tensor_set.h"
#include "core/offload/layer_group.h"

namespace ferry::models::h3 {

struct VisionConfig {
  std::int64_t dim = 0;                        // hidden size (1152)
  std::int64_t heads = 0;                      // 16
  std::int64_t ffn_dim = 0;                    // 4304
  std::int64_t depth = 0;                      // blocks (27)
  std::int64_t patch = 0;                      // 16
  std::int64_t temporal_patch = 0;             // 2
  std::int64_t merge = 0;                      // 2
  std::int64_t out_dim = 0;                    // the language model's hidden size (5120)
  std::int64_t position_side = 0;              // the learned position table is side x side (48)
  std::vector<std::int64_t> deepstack_blocks;  // block after which DeepStack merger k reads
  // Not in the weights: Qwen3-VL's values.
  float norm_eps = 1e-6f;
  float rope_theta = 10000.0f;

  std::int64_t head_dim() const { return dim / heads; }
  std::int64_t patch_values() const { return 3 * temporal_patch * patch * patch; }
  std::int64_t merge_unit() const { return merge * merge; }
  std::int64_t merged_dim() const { return dim * merge_unit(); }
};

// A block's tensors, in the order its group holds them; a block a DeepStack merger reads after
// also holds that merger's (kDeepNorm…), and the last group is the final merger's.
enum BlockTensor : std::size_t {
  kNorm1Weight,
  kNorm1Bias,
  kQkvWeight,
  kQkvBias,
  kProjWeight,
  kProjBias,
  kNorm2Weight,
  kNorm2Bias,
  kFc1Weight,
  kFc1Bias,
  kFc2Weight,
  kFc2Bias,
  kBlockTensorCount
};
// A merger's tensors (the DeepStack mergers' after their block's, the final merger's alone).
enum MergerTensor : std::size_t {
  kMergerNormWeight,
  kMergerNormBias,
  kMergerFc1Weight,
  kMergerFc1Bias,
  kMergerFc2Weight,
  kMergerFc2Bias,
  kMergerTensorCount
};
// The first group's: the patch embedding (a Conv3d with kernel = stride, read as a Linear over
// the patch's values) and the learned position table.
enum EmbedTensor : std::size_t { kPatchWeight, kPatchBias, kPositionTable, kEmbedTensorCount };

class VisionTowerWeights {
 public:
  // Qwen3-VL's defaults: heads of 72, DeepStack after blocks 8, 16, 24.
  static constexpr std::int64_t kHeadDim = 72;
  static const std::array<std::int64_t, 3> kDeepstackBlocks;

  // Recognises the prefix and infers the configuration from the shapes; `heads` 0 means
  // dim / 72, `deepstack_blocks` empty means {8, 16, 24}. Error(kBadModelFile) when the file
  // holds no vision tower, a shape does not fit or the DeepStack blocks do not match its
  // mergers; Error(kMissingTensor) naming the first absent tensor; Error(kUnsupported) for a
  // weight that is not f32/f16/bf16. `set` must outlive this.
  static VisionTowerWeights from(const io::TensorSet& set, std::int64_t heads = 0,
                                 std::vector<std::int64_t> deepstack_blocks = {});
  // Whether `set` holds a vision tower (either prefix).
  static bool present(const io::TensorSet& set);

  const VisionConfig& config() const { return config_; }
  const std::string& prefix() const { return prefix_; }

  // Groups: "visual.embed", "visual.blocks.N" (with DeepStack merger k's tensors after block
  // deepstack_blocks[k]), "visual.merger".
  std::size_t block_group(std::int64_t block) const { return static_cast<std::size_t>(block) + 1; }
  std::size_t merger_group() const { return static_cast<std::size_t>(config_.depth) + 1; }
  // The DeepStack merger that reads after `block`, or -1.
  int deepstack_after(std::int64_t block) const;

  // Device memory of one forward over images of `patches` patches in all (each a whole number of
  // merge blocks), in `activations` (bf16 or f32): exactly what the forward allocates.
  std::uint64_t activation_bytes(std::int64_t patches, DType activations = DType::kBF16) const;

  // The largest image plan: two 768x1344 keyframes (4032 patches each).
  static constexpr std::int64_t kPlanPatches = 2 * 4032;
  offload::ModelLayout model_layout(std::int64_t patches = kPlanPatches) const;

 private:
  VisionTowerWeights() = default;

  const io::TensorSet* set_ = nullptr;
  std::string prefix_;
  VisionConfig config_;
  std::vector<offload::LayerGroup> groups_;
};

}  // namespace ferry::models::h3
