// H3's vision tower forward (minimax_h3.md §B.4): Qwen3-VL's ViT over the keyframes' patches on
// a Backend, its groups streamed by the offload engine: patch embedding (the Conv3d as a Linear
// over each patch's values) plus the learned positions resampled bilinearly to each image's grid,
// pre-LN blocks with 2-D rotary attention within each image and a gelu-tanh MLP, the DeepStack
// mergers after their blocks and the final 2x2 merger. The outputs are one row per LLM token of
// each image (in image order, raster order over the merged grid): the rows that replace the
// <|image_pad|> embeddings and the DeepStack additions of the first decoder layers.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/memory/arena.h"
#include "core/models/h3/image_preprocess.h"
#include "core/models/h3/vision_tower_weights.h"
#include "core/offload/plan.h"
#include "core/offload/streamer.h"

namespace ferry::models::h3 {

// On the host, values of the activation dtype (bf16 values exactly when it is bf16).
struct VisionFeatures {
  std::int64_t tokens = 0;                    // LLM tokens: patches / merge²
  std::int64_t dim = 0;                       // the language model's hidden size
  std::vector<float> merged;                  // [tokens, dim]
  std::vector<std::vector<float>> deepstack;  // per DeepStack merger, [tokens, dim]
};

struct VisionEncodeResult {
  VisionFeatures features;
  offload::StreamStats stream;         // the plan overload only
  std::uint64_t activation_bytes = 0;  // the arena's size
  std::uint64_t activation_peak = 0;   // and how much of it was used
};

struct VisionEncodeOptions {
  offload::StreamerOptions streamer;  // `passes` is set to 1
  const std::atomic<bool>* cancel = nullptr;
  DType activations = DType::kBF16;  // the release runs bf16; f32 for exactness checks
};

// Throws Error: kBadArgument for no images or patches that do not fit the tower (values per
// patch, a grid that is not whole merge blocks); kCancelled; kIo / kOutOfMemory from the
// streamer or the backend.
VisionEncodeResult encode_images(Backend& backend, const VisionTowerWeights& weights,
                                 const offload::Plan& plan, std::span<const VisionPatches> images,
                                 const VisionEncodeOptions& options = {});

// The same forward on what a stage owns: `weights_source` (one pass over weights.model_layout())
// and `arena` (at least weights.activation_bytes(patches, activations) bytes).
VisionEncodeResult encode_images(Backend& backend, const VisionTowerWeights& weights,
                                 offload::WeightSource& weights_source, memory::Arena& arena,
                                 std::span<const VisionPatches> images,
                                 DType activations = DType::kBF16,
                                 const std::atomic<bool>* cancel = nullptr);

// The learned positions of one image's grid (gh x gw patches, merge-block order) as
// transformers' get_vision_interpolation_indices_and_weights gives them: bilinear with
// align_corners over the side x side table, 4 taps, f32 weights; `table` [side², dim] in f32.
// Returns [gh * gw, dim] f32, the sum over the taps in tap order.
std::vector<float> interpolated_positions(std::span<const float> table, std::int64_t side,
                                          std::int64_t dim, std::int64_t gh, std::int64_t gw,
                                          std::int64_t merge);

}  // namespace ferry::models::h3
