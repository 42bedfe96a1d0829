// H3's conditioner with keyframes (minimax_h3.md §B.3–B.4): the vision tower's output laid into
// the prompt — its merged rows replace the <|image_pad|> embeddings in order of appearance, its
// DeepStack features are added at those rows after decoder layers 0, 1, 2, and the positions are
// get_rope_index's with each keyframe's merged grid — then the 50 decoder layers. The tower runs
// first and frees everything it held before the language model plans.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/models/h3/text_encoder.h"
#include "core/models/h3/vision_tower.h"
#include "core/offload/plan.h"

namespace ferry::models::h3 {

// The text encoder's input for `ids` with the tower's `features` for `images` (one
// <|image_pad|> run per image, in order). Error(kBadArgument) when the runs and the images or
// the features do not match.
struct ConditionerInput {
  TextEncoderInput text;  // text.vision points at `vision`: keep the two together
  VisionRows vision;

  ConditionerInput() = default;
  ConditionerInput(const ConditionerInput&) = delete;
  ConditionerInput& operator=(const ConditionerInput&) = delete;
};
void lay_out_keyframes(std::span<const std::int32_t> ids, std::int32_t image_pad,
                       std::int32_t video_pad, std::span<const VisionPatches> images,
                       std::int64_t merge, const VisionFeatures& features, ConditionerInput& out);

struct ConditionerPlans {
  const offload::Plan* vision = nullptr;  // over the tower's model_layout(patches)
  const offload::Plan* text = nullptr;    // over the language model's model_layout()
};

struct ConditionerOptions {
  offload::StreamerOptions streamer;
  const std::atomic<bool>* cancel = nullptr;
};

struct ConditionerResult {
  TextEncodeResult text;
  offload::StreamStats vision_stream;
  std::uint64_t vision_activation_bytes = 0;
};

// The conditioning of a prompt with keyframes (none: the text-only encode). The ids are H3's
// presentation (presentation.h); `image_pad` / `video_pad` its vision ids.
ConditionerResult encode_conditioner(Backend& backend, const TextEncoderWeights& text,
                                     const VisionTowerWeights& vision,
                                     const ConditionerPlans& plans,
                                     std::span<const std::int32_t> ids, std::int32_t image_pad,
                                     std::int32_t video_pad, std::span<const VisionPatches> images,
                                     const ConditionerOptions& options = {});

}  // namespace ferry::models::h3
