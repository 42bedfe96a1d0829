#include "core/models/h3/conditioner.h"

#include <string>

#include "core/error.h"
#include "core/tensor/convert.h"

namespace ferry::models::h3 {
namespace {

std::vector<std::uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  convert_from_f32(values.data(), DType::kBF16, out.data(), values.size());
  return out;
}

}  // namespace

void lay_out_keyframes(std::span<const std::int32_t> ids, std::int32_t image_pad,
                       std::int32_t video_pad, std::span<const VisionPatches> images,
                       std::int64_t merge, const VisionFeatures& features, ConditionerInput& out) {
  out.text.ids.assign(ids.begin(), ids.end());
  out.vision = {};
  std::vector<VisionGrid> grids;
  for (const VisionPatches& p : images) {
    if (merge <= 0 || p.grid.h % merge != 0 || p.grid.w % merge != 0) {
      throw Error(ErrorCode::kBadArgument, "a keyframe grid of " + std::to_string(p.grid.h) + "x" +
                                               std::to_string(p.grid.w) +
                                               " patches is not whole merge blocks");
    }
    grids.push_back({p.grid.t, p.grid.h / merge, p.grid.w / merge});
  }
  // get_rope_index's positions also check that each <|image_pad|> run is its image's tokens.
  out.text.positions = rope_positions(token_types(ids, image_pad, video_pad), grids);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == image_pad) out.vision.rows.push_back(static_cast<std::int64_t>(i));
  }
  const auto rows = static_cast<std::int64_t>(out.vision.rows.size());
  if (features.tokens != rows) {
    throw Error(ErrorCode::kBadArgument, "the vision tower gave " +
                                             std::to_string(features.tokens) + " rows for " +
                                             std::to_string(rows) + " image tokens");
  }
  out.vision.embeddings = to_bf16(features.merged);
  for (const auto& d : features.deepstack) out.vision.deepstack.push_back(to_bf16(d));
  out.text.vision = rows > 0 ? &out.vision : nullptr;
}

ConditionerResult encode_conditioner(Backend& backend, const TextEncoderWeights& text,
                                     const VisionTowerWeights& vision,
                                     const ConditionerPlans& plans,
                                     std::span<const std::int32_t> ids, std::int32_t image_pad,
                                     std::int32_t video_pad, std::span<const VisionPatches> images,
                                     const ConditionerOptions& options) {
  if (vision.config().out_dim != text.config().dim) {
    throw Error(ErrorCode::kBadModelFile,
                "the vision tower's output (" + std::to_string(vision.config().out_dim) +
                    ") is not the language model's width (" + std::to_string(text.config().dim) +
                    "): the two do not belong together");
  }
  ConditionerResult result;
  VisionFeatures features;
  if (!images.empty()) {
    VisionEncodeOptions vision_options;
    vision_options.streamer = options.streamer;
    vision_options.cancel = options.cancel;
    // Its streamer, slots and arena are gone when this returns (architecture.md §3 rule 5).
    VisionEncodeResult v = encode_images(backend, vision, *plans.vision, images, vision_options);
    features = std::move(v.features);
    result.vision_stream = v.stream;
    result.vision_activation_bytes = v.activation_bytes;
  }
  ConditionerInput input;
  lay_out_keyframes(ids, image_pad, video_pad, images, vision.config().merge, features, input);
  TextEncodeOptions text_options;
  text_options.streamer = options.streamer;
  text_options.cancel = options.cancel;
  result.text = encode(backend, text, *plans.text, input.text, text_options);
  return result;
}

}  // namespace ferry::models::h3
