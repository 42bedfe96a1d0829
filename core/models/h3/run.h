// One MiniMax-H3 generation's stages (core/models/family.h): text (the conditioner, with the
// keyframes' vision rows for I2VA / FL2VA) → image (each keyframe encoded by the video VAE's
// encoder at the canvas) → denoise (the packed sequence through diffusers' loop: one DiT forward
// a step, the video and audio rows stepped by their own schedules, no CFG) → decode (the audio
// first, its soundtrack handed to the pipeline before any frame, then the video streamed to the
// writer). The mode follows from the images given: none T2VA, a start or an end frame I2VA, both
// FL2VA. Each stage frees everything it allocated before the next plans; what crosses stages (the
// conditioning, the keyframe rows, the latents) lives in the run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/memory/arena.h"
#include "core/models/family.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/model_set.h"
#include "core/models/h3/scheduler.h"
#include "core/models/lora/lora_binding.h"
#include "core/offload/weight_source.h"

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

// What the denoise loop tells its caller around each forward (either may be empty).
struct DenoiseLoopHooks {
  std::function<void(std::size_t step)> before_step;
  // After the step's update: the target video rows as they now are.
  std::function<void(std::size_t step, std::span<const float> target_video)> after_step;
};

// diffusers' H3 loop over the packed sequence (§C.2, §D.1): for each of the schedules' steps one
// forward of `weights` (through `source`, activations from `arena`) with the step's per-row
// timesteps, then an Euler step of the target video rows on `video_schedule` and of the audio rows
// on `audio_schedule`; the keyframe rows (the first sequence.condition_rows of `video`) are never
// changed. `video` [condition + target rows, patch_dim], `audio` [2A, audio_channels], in place.
// `loras`: runtime LoRA terms bound to `source`'s layout (dit_loras.h; the arena holds their
// scratch). Error(kBadArgument) when the schedules' lengths differ; kCancelled between and within
// forwards.
void denoise_packed(Backend& backend, const dit::DitWeights& weights, offload::WeightSource& source,
                    memory::Arena& arena, const dit::PackedSequence& sequence,
                    std::span<const std::uint16_t> text, const H3Schedule& video_schedule,
                    const H3Schedule& audio_schedule, std::span<float> video,
                    std::span<float> audio, std::int64_t chunk_tokens,
                    const std::atomic<bool>* cancel, const DenoiseLoopHooks& hooks = {},
                    std::span<const lora::BoundTerm> loras = {});

// The run of `request` on `set` (its parts opened in `opened`, both outliving the run), its prompt
// read by `tokenizer`: the set's, as its plans read it (null only for a run that decodes saved
// latents, which has no text stage).
std::unique_ptr<FamilyRun> start_run(const ModelSet& set, const OpenedParts& opened,
                                     std::shared_ptr<const BpeTokenizer> tokenizer,
                                     const ResolvedRequest& request, const GenerationPlan& plan,
                                     FrameImages images);

}  // namespace ferry::models::h3
