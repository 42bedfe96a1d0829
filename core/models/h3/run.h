// One MiniMax-H3 generation's stages (core/models/family.h): text (the conditioner, with the
// keyframes' vision rows for I2VA / FL2VA) → image (each keyframe encoded by the video VAE's
// encoder at the canvas) → denoise (the packed sequence through diffusers' loop: one DiT forward
// a step, the video and audio rows stepped by their own schedules, no CFG) → decode (the audio
// first, its soundtrack handed to the pipeline before any frame, then the video streamed to the
// writer). The mode follows from the images given: none T2VA, a start or an end frame I2VA, both
// FL2VA. Each stage frees everything it allocated before the next plans; what crosses stages (the
// conditioning, the keyframe rows, the latents) lives in the run.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/models/family.h"
#include "core/models/h3/model_set.h"

namespace ferry::models::h3 {

// The stage names of H3's GenerationPlan, in order.
inline constexpr std::string_view kVisionStage = "vision tower";
inline constexpr std::string_view kTextStage = "text encoder";
inline constexpr std::string_view kKeyframeStage = "keyframe encode";
inline constexpr std::string_view kDitStage = "diffusion model";
inline constexpr std::string_view kVideoDecodeStage = "video decode";
inline constexpr std::string_view kAudioDecodeStage = "audio decode";

// The seed of the keyframes' posterior samples (diffusers' encode_vae_condition draws them from a
// generator seeded 42 whatever the request's seed).
inline constexpr std::uint64_t kKeyframePosteriorSeed = 42;

// Audio latents per channel for `frames` video frames at 24 fps: 40 a second, rounded (§F.1:
// 124 frames -> 207).
std::int64_t audio_latents_for(std::int64_t frames);

// The noise a run starts from and the latents it ends with, for a request of these sizes:
// "video" [24, T', h, w] and "audio" [2A, 32] (diffusers' row shape) in; "video" and "audio"
// [2, 32, A] out.
std::vector<TensorLayout> h3_noise_layout(const ResolvedRequest& r, std::int64_t video_channels,
                                          std::int64_t audio_channels);
std::vector<TensorLayout> h3_latent_layout(const ResolvedRequest& r, std::int64_t video_channels,
                                           std::int64_t audio_channels);

// The run of `request` on `set` (its parts opened in `opened`, both outliving the run).
std::unique_ptr<FamilyRun> start_run(const ModelSet& set, const OpenedParts& opened,
                                     const ResolvedRequest& request, const GenerationPlan& plan,
                                     FrameImages images);

}  // namespace ferry::models::h3
