// One MiniMax-H3 generation's stages (run.h). The denoise follows diffusers 0.42.1's modular H3
// pipeline (minimax_h3.md §C.2, §D.1): r.steps forwards over a schedule of r.steps + 1 grid
// points; each forward takes the whole packed sequence with per-row timesteps (text and target
// video t_v, audio t_a, keyframe rows max(t_v, 0.999)) and its velocities step the target video
// rows on the video schedule (shift `r.shift`, 12 by default) and the audio rows on the audio
// schedule (shift 3); the keyframe rows never change. No CFG (the weights are CFG-distilled).
#include "core/models/h3/run.h"

#include <algorithm>
#include <any>
#include <chrono>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/memory/arena.h"
#include "core/models/device_tensor.h"
#include "core/models/h3/audio_vae.h"
#include "core/models/h3/audio_vae_weights.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/conditioner.h"
#include "core/models/h3/dit.h"
#include "core/models/h3/dit_loras.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/image_preprocess.h"
#include "core/models/h3/presentation.h"
#include "core/models/h3/scheduler.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/models/h3/video_vae_chunks.h"
#include "core/models/h3/video_vae_encoder.h"
#include "core/models/h3/video_vae_plan.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/models/h3/vision_tower_weights.h"
#include "core/models/noise.h"
#include "core/offload/streamer.h"

namespace ferry::models::h3 {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Offsets of the request seed's stream (normal_noise): the video noise first, the audio noise
// after it, then one stream of 2^40 samples per keyframe's augmentation noise.
constexpr std::uint64_t kAudioNoiseOffset = std::uint64_t{1} << 40;
std::uint64_t keyframe_noise_offset(std::size_t k) {
  return (std::uint64_t{2} + k) << 40;
}

const StagePlan& stage_plan(const GenerationPlan& plan, std::string_view name) {
  for (const StagePlan& s : plan.stages) {
    if (s.stage == name) return s;
  }
  throw Error(ErrorCode::kInternal, "the plan has no " + std::string(name) + " stage");
}

offload::StreamerOptions one_pass(const RunContext& ctx, std::size_t passes = 1) {
  offload::StreamerOptions options = ctx.streamer;
  options.passes = passes;
  return options;
}

std::vector<std::uint64_t> dims(std::initializer_list<std::int64_t> values) {
  std::vector<std::uint64_t> out;
  for (std::int64_t v : values) out.push_back(static_cast<std::uint64_t>(v));
  return out;
}

// The first target frame of the video rows as RGB: the latent channels in three groups, each
// group's mean one colour, stretched to the frame's range (as Wan's sketch).
media::RgbImage rows_preview(std::span<const float> rows, const dit::PackedGeometry& g,
                             std::int64_t channels) {
  const std::int64_t ph = g.latent_height / g.patch, pw = g.latent_width / g.patch;
  const std::int64_t values = channels * g.patch * g.patch;
  std::vector<float> rgb(static_cast<std::size_t>(ph * pw * 3), 0.0f);
  for (std::int64_t p = 0; p < ph * pw; ++p) {
    for (std::int64_t v = 0; v < values; ++v) {
      const std::int64_t colour = std::min<std::int64_t>(2, (v / 4) * 3 / channels);
      rgb[static_cast<std::size_t>(p * 3 + colour)] +=
          rows[static_cast<std::size_t>(p * values + v)];
    }
  }
  const auto [lo, hi] = std::minmax_element(rgb.begin(), rgb.end());
  const float range = std::max(*hi - *lo, 1e-6f);
  media::RgbImage image{static_cast<int>(pw), static_cast<int>(ph),
                        std::vector<std::uint8_t>(rgb.size())};
  for (std::size_t i = 0; i < rgb.size(); ++i) {
    image.rgb[i] = static_cast<std::uint8_t>(std::lround((rgb[i] - *lo) / range * 255.0f));
  }
  return image;
}

// An 8-bit RGB image (interleaved) as the encoder reads it: planar [3, H, W].
std::vector<std::uint8_t> planar(const media::RgbImage& image) {
  const std::size_t plane = static_cast<std::size_t>(image.width) * image.height;
  std::vector<std::uint8_t> out(3 * plane);
  for (std::size_t i = 0; i < plane; ++i) {
    for (std::size_t c = 0; c < 3; ++c) out[c * plane + i] = image.rgb[i * 3 + c];
  }
  return out;
}

class H3Run final : public FamilyRun {
 public:
  H3Run(const ModelSet& set, const OpenedParts& opened,
        std::shared_ptr<const BpeTokenizer> tokenizer, const ResolvedRequest& r,
        const GenerationPlan& plan, FrameImages images)
      : set_(set),
        opened_(opened),
        tokenizer_(std::move(tokenizer)),
        r_(r),
        plan_(plan),
        images_(std::move(images)) {
    geometry_.latent_frames = r.latent_frames;
    geometry_.latent_height = r.latent_height;
    geometry_.latent_width = r.latent_width;
    geometry_.audio_latents = audio_latents_for(r.frames);
    if (images_.start) anchors_.push_back(dit::KeyframeAnchor::kFirst);
    if (images_.end) anchors_.push_back(dit::KeyframeAnchor::kLast);
  }

  std::vector<StageKind> stages() const override {
    if (!r_.request.latents.empty()) return {StageKind::kDecode};
    if (anchors_.empty()) return {StageKind::kText, StageKind::kDenoise, StageKind::kDecode};
    return {StageKind::kText, StageKind::kImage, StageKind::kDenoise, StageKind::kDecode};
  }

  void run_stage(StageKind stage, RunContext& ctx) override {
    switch (stage) {
      case StageKind::kText:
        return encode_text(ctx);
      case StageKind::kImage:
        return encode_keyframes(ctx);
      case StageKind::kDenoise:
        return denoise(ctx);
      case StageKind::kDecode:
        if (!r_.request.latents.empty()) read_saved_latents(ctx);
        decode_audio(ctx);
        return decode_video(ctx);
      case StageKind::kWrite:
        break;
    }
    throw Error(ErrorCode::kInternal, "H3 has no " + std::string(stage_key(stage)) + " stage");
  }

 private:
  // The keyframes in packed order (first, then last), fitted to the canvas: the first stretched,
  // the last cover-cropped (diffusers' prepare step, §H.1; bicubic where it uses Lanczos).
  std::vector<media::RgbImage> fitted_keyframes() const {
    std::vector<media::RgbImage> frames;
    if (images_.start) frames.push_back(resize_bicubic(*images_.start, r_.width, r_.height));
    if (images_.end) {
#if defined(FERRY_HAVE_FFMPEG)
      frames.push_back(media::resize_and_center_crop(*images_.end, r_.width, r_.height));
#else
      frames.push_back(resize_bicubic(*images_.end, r_.width, r_.height));
#endif
    }
    return frames;
  }

  // The conditioner: the presentation of the prompt (with a vision block per keyframe), the
  // tower over the keyframes, then the language model; both streamed under their stage plans.
  void encode_text(RunContext& ctx) {
    if (!tokenizer_) throw Error(ErrorCode::kInternal, "the run was given no tokenizer");
    const BpeTokenizer& tokenizer = *tokenizer_;
    keyframes_ = fitted_keyframes();
    std::vector<VisionPatches> patches;
    std::vector<std::size_t> vision_tokens;
    for (const media::RgbImage& k : keyframes_) {
      patches.push_back(preprocess_image(k));
      vision_tokens.push_back(vision_token_count(static_cast<std::size_t>(k.height),
                                                 static_cast<std::size_t>(k.width)));
    }
    const Presentation p =
        keyframes_.empty() ? present_text(tokenizer, r_.request.prompt)
                           : present_with_keyframes(tokenizer, r_.request.prompt, vision_tokens);
    text_tags_ = p.tags;
    const TextEncoderWeights text = TextEncoderWeights::from(opened_.text_encoder);
    ConditionerPlans plans;
    plans.text = &stage_plan(plan_, kTextStage).plan;
    std::optional<VisionTowerWeights> tower;
    if (!keyframes_.empty()) {
      tower.emplace(VisionTowerWeights::from(opened_.text_encoder));
      plans.vision = &stage_plan(plan_, kVisionStage).plan;
    }
    ConditionerOptions options;
    options.streamer = one_pass(ctx);
    options.cancel = &ctx.cancel.flag();
    const std::int32_t image_pad = tokenizer.token_id("<|image_pad|>").value_or(-1);
    const std::int32_t video_pad = tokenizer.token_id("<|video_pad|>").value_or(-1);
    ConditionerResult result = tower ? encode_conditioner(ctx.backend, text, *tower, plans, p.ids,
                                                          image_pad, video_pad, patches, options)
                                     : encode_text_only(ctx, text, plans, p.ids);
    text_ = std::move(result.text.states);
    if (ctx.text_state) {
      ctx.text_state({"context", DType::kBF16, dims({text_.rows, text_.dim}),
                      std::as_bytes(std::span(text_.bf16))});
    }
  }

  ConditionerResult encode_text_only(RunContext& ctx, const TextEncoderWeights& text,
                                     const ConditionerPlans& plans,
                                     const std::vector<std::int32_t>& ids) {
    TextEncoderInput input;
    input.ids = ids;
    TextEncodeOptions options;
    options.streamer = one_pass(ctx);
    options.cancel = &ctx.cancel.flag();
    ConditionerResult result;
    result.text = encode(ctx.backend, text, *plans.text, input, options);
    return result;
  }

  // Each keyframe through the video VAE's encoder at the canvas: its posterior sampled (seed
  // 42), normalised, mixed 0.999·z + 0.001·ε with ε from the request's seed (§C.2), patchified.
  void encode_keyframes(RunContext& ctx) {
    const vae::VideoVaeWeights weights = vae::VideoVaeWeights::from(opened_.video_vae);
    const vae::VideoVaeEncoder encoder = vae::VideoVaeEncoder::load(ctx.backend, weights);
    dit::PackedGeometry one = geometry_;
    one.latent_frames = 1;
    keyframe_rows_.clear();
    for (std::size_t k = 0; k < keyframes_.size(); ++k) {
      ctx.cancel.throw_if_cancelled();
      const vae::FrameMoments moments =
          encoder.encode_frame(planar(keyframes_[k]), r_.height, r_.width);
      std::vector<float> posterior(moments.mean.size());
      normal_noise(kKeyframePosteriorSeed, k * posterior.size(), posterior);
      std::vector<float> z = vae::keyframe_latent(moments, posterior, weights.config());
      std::vector<float> augment(z.size());
      normal_noise(r_.request.seed, keyframe_noise_offset(k), augment);
      for (std::size_t i = 0; i < z.size(); ++i) {
        z[i] = dit::kKeyframeNoiseAug * z[i] + (1.0f - dit::kKeyframeNoiseAug) * augment[i];
      }
      const std::vector<float> rows = dit::patchify_video(z, moments.channels, one);
      keyframe_rows_.insert(keyframe_rows_.end(), rows.begin(), rows.end());
    }
    keyframes_.clear();
    keyframes_.shrink_to_fit();
  }

  // The sampler's N − 1 forwards, each one DiT pass streamed under the stage's plan, a telemetry
  // step and a preview each.
  void denoise(RunContext& ctx) {
    const dit::DitWeights weights = dit::DitWeights::from(opened_.dit);
    const dit::DitConfig& c = weights.config();
    const dit::PackedSequence sequence =
        dit::build_packed_sequence(text_tags_, geometry_, anchors_);
    const std::int64_t video_channels = c.patch_dim / (geometry_.patch * geometry_.patch);
    // r.steps forwards: a schedule of r.steps + 1 grid points (family.cpp, kDefaultSteps).
    const H3Schedule video_schedule = h3_schedule(r_.steps + 1, static_cast<float>(r_.shift));
    const H3Schedule audio_schedule = h3_schedule(r_.steps + 1, kAudioShift);
    // The video rows: the keyframes' first, then the target's patchified noise.
    std::vector<float> noise(static_cast<std::size_t>(video_channels * geometry_.latent_frames *
                                                      geometry_.latent_height *
                                                      geometry_.latent_width));
    fill_noise(ctx, "video", 0, noise);
    const std::vector<float> target = dit::patchify_video(noise, video_channels, geometry_);
    noise = {};
    std::vector<float> video(keyframe_rows_);
    video.insert(video.end(), target.begin(), target.end());
    keyframe_rows_ = {};
    std::vector<float> audio(static_cast<std::size_t>(sequence.audio_rows * c.audio_channels));
    fill_noise(ctx, "audio", kAudioNoiseOffset, audio);

    // The LoRAs' tensors stream with their blocks (dit_loras.h); the binding outlives the
    // streamer, whose layout points into its files.
    offload::ModelLayout layout =
        weights.model_layout(sequence.length(), sequence.text_rows, ctx.preset.chunk_tokens);
    const lora::LoraBinding loras =
        bind_dit_loras(r_.request.loras, weights, layout, sequence.length(), sequence.text_rows,
                       ctx.preset.chunk_tokens, 3);
    offload::WeightStreamer streamer(ctx.backend, layout, stage_plan(plan_, kDitStage).plan,
                                     one_pass(ctx, video_schedule.steps()));
    const auto watch = ctx.cancel.watch(streamer);
    const auto arena_bytes = static_cast<std::size_t>(
        weights.activation_bytes(sequence.length(), sequence.text_rows, ctx.preset.chunk_tokens, 3,
                                 dit::lora_scratch_rank(loras.terms())));
    const auto arena_memory = ctx.backend.allocate(arena_bytes);
    memory::Arena arena(arena_memory->data(), arena_bytes, ctx.backend.device());

    offload::StreamStats before;
    Clock::time_point start;
    DenoiseLoopHooks hooks;
    hooks.before_step = [&](std::size_t) {
      before = streamer.stats();
      ctx.telemetry.begin_step();
      start = Clock::now();
    };
    hooks.after_step = [&](std::size_t, std::span<const float> target_rows) {
      const offload::StreamStats after = streamer.stats();
      const double wait = after.acquire_wait_seconds - before.acquire_wait_seconds;
      ctx.telemetry.end_step(seconds_since(start) - wait, wait,
                             after.bytes_read - before.bytes_read);
      if (ctx.preview) ctx.preview(rows_preview(target_rows, geometry_, video_channels));
    };
    denoise_packed(ctx.backend, weights, streamer, arena, sequence, text_.bf16, video_schedule,
                   audio_schedule, video, audio, ctx.preset.chunk_tokens, &ctx.cancel.flag(), hooks,
                   loras.terms());
    video_ = dit::unpatchify_video(
        std::span(video).subspan(static_cast<std::size_t>(sequence.condition_rows * c.patch_dim)),
        video_channels, geometry_);
    audio_ = audio_rows_to_channels(audio, c.audio_channels);
    text_ = {};
    text_tags_ = {};
    if (ctx.final_latent) {
      ctx.final_latent("video", video_);
      ctx.final_latent("audio", audio_);
    }
  }

  void fill_noise(RunContext& ctx, std::string_view name, std::uint64_t offset,
                  std::span<float> out) {
    if (ctx.initial_noise) {
      ctx.initial_noise(name, out);
    } else {
      normal_noise(r_.request.seed, offset, out);
    }
    if (ctx.noise_used) ctx.noise_used(name, out);
  }

  // Rows [2A, C] (row c·A + j = channel c's latent j) → [2, C, A], the decoder's layout.
  std::vector<float> audio_rows_to_channels(std::span<const float> rows,
                                            std::int64_t channels) const {
    const std::int64_t a = geometry_.audio_latents;
    std::vector<float> out(rows.size());
    for (std::int64_t s = 0; s < dit::kAudioChannels; ++s) {
      for (std::int64_t j = 0; j < a; ++j) {
        for (std::int64_t k = 0; k < channels; ++k) {
          out[static_cast<std::size_t>((s * channels + k) * a + j)] =
              rows[static_cast<std::size_t>((s * a + j) * channels + k)];
        }
      }
    }
    return out;
  }

  void read_saved_latents(RunContext& ctx) {
    if (!ctx.saved_latent) {
      throw Error(ErrorCode::kInternal, "the run was given no saved latents to decode");
    }
    const dit::DitConfig c = dit::DitWeights::from(opened_.dit).config();
    video_.resize(static_cast<std::size_t>(c.patch_dim / 4 * geometry_.latent_frames *
                                           geometry_.latent_height * geometry_.latent_width));
    audio_.resize(
        static_cast<std::size_t>(dit::kAudioChannels * c.audio_channels * geometry_.audio_latents));
    ctx.saved_latent("video", video_);
    ctx.saved_latent("audio", audio_);
  }

  // The audio VAE's decoder over both channels: the soundtrack, handed to the pipeline before the
  // first frame (the writer opens with it). Its weights and arena are freed on return.
  void decode_audio(RunContext& ctx) {
    ctx.cancel.throw_if_cancelled();
    std::optional<io::TensorSet> own;
    const io::TensorSet* set = &opened_.audio_vae;
    if (set->files().empty()) set = &own.emplace(io::TensorSet::open(set_.audio_vae));
    const AudioVaeWeights weights = AudioVaeWeights::load(ctx.backend, *set);
    const AudioVaeDecoder decoder(ctx.backend, weights);
    const std::int64_t a = geometry_.audio_latents;
    DeviceTensor latents = device_tensor(ctx.backend, DType::kF32,
                                         Shape{dit::kAudioChannels, weights.latent_channels(), a});
    if (static_cast<std::size_t>(latents.tensor.numel()) != audio_.size()) {
      throw Error(ErrorCode::kBadModelFile,
                  "the audio VAE reads " + std::to_string(weights.latent_channels()) +
                      " latent channels; the diffusion model makes " +
                      std::to_string(audio_.size() / static_cast<std::size_t>(2 * a)));
    }
    ctx.backend.upload(latents.tensor, audio_.data());
    const std::size_t arena_bytes =
        AudioVaeDecoder::soundtrack_arena_bytes(weights, dit::kAudioChannels, a);
    const auto arena_memory = ctx.backend.allocate(arena_bytes);
    memory::Arena arena(arena_memory->data(), arena_bytes, ctx.backend.device());
    media::AudioTrack track = decoder.decode_soundtrack(latents.tensor, arena);
    audio_ = {};
    if (ctx.soundtrack) ctx.soundtrack(std::move(track));
  }

  // The video decode as its plan says (chunks of 7 latents, 256 px tiles), frames handed to the
  // pipeline as each chunk completes, in [-1, 1].
  void decode_video(RunContext& ctx) {
    const vae::VideoVaeWeights weights = vae::VideoVaeWeights::from(opened_.video_vae);
    vae::DecodeOptions options;
    options.cancel = &ctx.cancel.flag();
    std::vector<float> frames;
    vae::decode_video(ctx.backend, weights, stage_plan(plan_, kVideoDecodeStage).plan, video_,
                      geometry_.latent_frames, geometry_.latent_height, geometry_.latent_width,
                      options,
                      [&](std::int64_t, const Shape& shape, std::span<const float> pixels) {
                        frames.resize(pixels.size());
                        std::transform(pixels.begin(), pixels.end(), frames.begin(),
                                       [](float v) { return v * 2.0f - 1.0f; });
                        ctx.frames(shape[1], frames);
                      });
    video_ = {};
  }

  const ModelSet& set_;
  const OpenedParts& opened_;
  const std::shared_ptr<const BpeTokenizer> tokenizer_;
  const ResolvedRequest r_;
  const GenerationPlan& plan_;
  const FrameImages images_;
  dit::PackedGeometry geometry_;
  std::vector<dit::KeyframeAnchor> anchors_;
  std::vector<media::RgbImage> keyframes_;  // fitted to the canvas, until encoded
  std::vector<std::uint8_t> text_tags_;
  TextStates text_;
  std::vector<float> keyframe_rows_;  // [K·R, patch_dim]
  std::vector<float> video_;          // [C, T', h, w] once denoised
  std::vector<float> audio_;          // [2, C, A] once denoised
};

}  // namespace

void denoise_packed(Backend& backend, const dit::DitWeights& weights, offload::WeightSource& source,
                    memory::Arena& arena, const dit::PackedSequence& sequence,
                    std::span<const std::uint16_t> text, const H3Schedule& video_schedule,
                    const H3Schedule& audio_schedule, std::span<float> video,
                    std::span<float> audio, std::int64_t chunk_tokens,
                    const std::atomic<bool>* cancel, const DenoiseLoopHooks& hooks,
                    std::span<const lora::BoundTerm> loras) {
  if (video_schedule.steps() != audio_schedule.steps()) {
    throw Error(ErrorCode::kBadArgument,
                "the video schedule has " + std::to_string(video_schedule.steps()) +
                    " steps and the audio one " + std::to_string(audio_schedule.steps()) +
                    " (the shift collapsed some of their grid points): choose fewer steps");
  }
  const auto condition_values =
      static_cast<std::size_t>(sequence.condition_rows * weights.config().patch_dim);
  for (std::size_t i = 0; i < video_schedule.steps(); ++i) {
    if (cancel != nullptr && cancel->load())
      throw Error(ErrorCode::kCancelled, "generation cancelled");
    if (hooks.before_step) hooks.before_step(i);
    const dit::RowTimesteps timesteps =
        dit::row_timesteps(sequence, video_schedule.timesteps[i], audio_schedule.timesteps[i]);
    dit::DitInput input;
    input.sequence = &sequence;
    input.timesteps = &timesteps;
    input.video = video;
    input.audio = audio;
    input.text = text;
    input.loras = loras;
    // Each forward takes its activations afresh: its outputs are on the host.
    const std::size_t mark = arena.mark();
    const dit::DitOutput out =
        dit::dit_forward(backend, weights, source, arena, input, chunk_tokens, cancel);
    arena.release_to(mark);
    // Only the target rows move: the keyframe rows keep their augmented latents.
    h3_euler_step(video_schedule, i, std::span(out.video).subspan(condition_values),
                  video.subspan(condition_values));
    h3_euler_step(audio_schedule, i, out.audio, audio);
    if (hooks.after_step) hooks.after_step(i, video.subspan(condition_values));
  }
}

std::int64_t audio_latents_for(std::int64_t frames) {
  return std::lround(static_cast<double>(frames) / 24.0 * 40.0);
}

std::vector<TensorLayout> h3_noise_layout(const ResolvedRequest& r, std::int64_t video_channels,
                                          std::int64_t audio_channels) {
  const std::int64_t a = audio_latents_for(r.frames);
  return {{"video", dims({video_channels, r.latent_frames, r.latent_height, r.latent_width})},
          {"audio", dims({dit::kAudioChannels * a, audio_channels})}};
}

std::vector<TensorLayout> h3_latent_layout(const ResolvedRequest& r, std::int64_t video_channels,
                                           std::int64_t audio_channels) {
  const std::int64_t a = audio_latents_for(r.frames);
  return {{"video", dims({video_channels, r.latent_frames, r.latent_height, r.latent_width})},
          {"audio", dims({dit::kAudioChannels, audio_channels, a})}};
}

std::unique_ptr<FamilyRun> start_run(const ModelSet& set, const OpenedParts& opened,
                                     std::shared_ptr<const BpeTokenizer> tokenizer,
                                     const ResolvedRequest& request, const GenerationPlan& plan,
                                     FrameImages images) {
  return std::make_unique<H3Run>(set, opened, std::move(tokenizer), request, plan,
                                 std::move(images));
}

}  // namespace ferry::models::h3
