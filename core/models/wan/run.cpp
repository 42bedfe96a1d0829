// One Wan generation's stages (core/models/family.h): text → [start image] → denoise → decode.
// Each stage allocates what its plan says when it starts and frees all of it when it ends
// (architecture.md §3.5); what crosses stages — the two text embeddings, z0, the latent — lives
// in the run.
#include <algorithm>
#include <any>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory/arena.h"
#include "core/models/device_tensor.h"
#include "core/models/noise.h"
#include "core/models/taehv/taehv_draft.h"
#include "core/models/taehv/taehv_preview.h"
#include "core/models/umt5/encoder.h"
#include "core/models/umt5/tokenizer.h"
#include "core/models/wan/denoise.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/dit_loras.h"
#include "core/models/wan/i2v.h"
#include "core/models/wan/parts.h"
#include "core/models/wan/ti2v.h"
#include "core/models/wan/vae.h"
#include "core/models/wan/vae_plan.h"
#include "core/models/wan/vae_tiling.h"
#include "core/offload/streamer.h"

namespace ferry::models::wan {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const StagePlan& stage_plan(const GenerationPlan& plan, std::string_view name) {
  for (const StagePlan& s : plan.stages) {
    if (s.stage == name) return s;
  }
  throw Error(ErrorCode::kInternal, "the plan has no " + std::string(name) + " stage");
}

// The first frame of a latent [C, T, h, w] as RGB: the channels in three groups, each group's
// mean one colour, stretched to the frame's range. Cheap, and it shows the composition forming.
media::RgbImage latent_preview(std::span<const float> latent, const LatentGrid& g) {
  const std::size_t plane = static_cast<std::size_t>(g.height) * g.width;
  const std::size_t frame_stride = static_cast<std::size_t>(g.frames) * plane;
  std::vector<float> rgb(plane * 3, 0.0f);
  for (int c = 0; c < g.channels; ++c) {
    const int colour = std::min(2, c * 3 / g.channels);
    for (std::size_t i = 0; i < plane; ++i) rgb[i * 3 + colour] += latent[c * frame_stride + i];
  }
  const auto [lo, hi] = std::minmax_element(rgb.begin(), rgb.end());
  const float range = std::max(*hi - *lo, 1e-6f);
  media::RgbImage image{g.width, g.height, std::vector<std::uint8_t>(plane * 3)};
  for (std::size_t i = 0; i < rgb.size(); ++i) {
    image.rgb[i] = static_cast<std::uint8_t>(std::lround((rgb[i] - *lo) / range * 255.0f));
  }
  return image;
}

// One expert's DiT, ready to denoise: its layout with its LoRAs' tensors, the LoRAs' files kept
// open (declared before the streamer: destroyed after it), the DiT, its streamer under the
// expert's stage plan, its arena — all released together when the expert's steps are done.
class ExpertWeights {
 public:
  ExpertWeights(const WanParts& parts, const ResolvedRequest& r, const GenerationPlan& plan,
                int expert, int passes, RunContext& ctx, std::int64_t branches, bool ti2v_image)
      : layout_(expert_model_layout(parts, expert, r.width, r.height, r.frames,
                                    ctx.preset.chunk_tokens)),
        loras_(bind_dit_loras(expert_loras(r.request.loras, parts.set(), expert),
                              parts.expert(expert), layout_, tokens(parts, r),
                              ctx.preset.chunk_tokens)),
        dit_(ctx.backend, parts.expert(expert), layout_, loras_.terms()),
        streamer_(ctx.backend, layout_, stage_plan(plan, dit_stage_name(parts.set(), expert)).plan,
                  streamer_options(ctx, passes)),
        watch_(ctx.cancel.watch(streamer_)),
        arena_bytes_(static_cast<std::size_t>(dit_activation_bytes(
            parts.set().dit_config, tokens(parts, r), ctx.preset.chunk_tokens, branches,
            ti2v_image ? 2 : 1, WanDit::lora_scratch_rank(loras_.terms())))),
        arena_memory_(ctx.backend.allocate(arena_bytes_)),
        arena_(arena_memory_->data(), arena_bytes_, ctx.backend.device()) {}

  DitPass pass() { return {dit_, streamer_, arena_}; }
  offload::StreamStats stats() const { return streamer_.stats(); }

 private:
  static std::int64_t tokens(const WanParts& parts, const ResolvedRequest& r) {
    return dit_tokens(parts.set().dit_config, r.width, r.height, r.frames);
  }
  static offload::StreamerOptions streamer_options(const RunContext& ctx, int passes) {
    offload::StreamerOptions options = ctx.streamer;
    options.passes = static_cast<std::size_t>(passes);
    return options;
  }

  offload::ModelLayout layout_;
  const lora::LoraBinding loras_;
  WanDit dit_;
  offload::WeightStreamer streamer_;
  offload::CancelToken::StreamerGuard watch_;
  std::size_t arena_bytes_;
  std::unique_ptr<DeviceBuffer> arena_memory_;
  memory::Arena arena_;
};

class WanRun final : public FamilyRun {
 public:
  WanRun(const WanParts& parts, const ResolvedRequest& r, const GenerationPlan& plan,
         FrameImages images)
      : parts_(parts),
        r_(r),
        plan_(plan),
        images_(std::move(images)),
        grid_{static_cast<int>(parts.set().dit_config.out_dim), static_cast<int>(r.latent_frames),
              static_cast<int>(r.latent_height), static_cast<int>(r.latent_width)} {}

  std::vector<StageKind> stages() const override {
    // Saved latents are decoded as they are: nothing to encode or denoise.
    if (!r_.request.latents.empty()) return {StageKind::kDecode};
    if (images_.start)
      return {StageKind::kText, StageKind::kImage, StageKind::kDenoise, StageKind::kDecode};
    return {StageKind::kText, StageKind::kDenoise, StageKind::kDecode};
  }

  void run_stage(StageKind stage, RunContext& ctx) override {
    switch (stage) {
      case StageKind::kText:
        return encode_text(ctx);
      case StageKind::kImage:
        return encode_image(ctx);
      case StageKind::kDenoise:
        return denoise_latent(ctx);
      case StageKind::kDecode:
        if (!r_.request.latents.empty()) read_saved_latent(ctx);
        if (r_.request.decoder == VideoDecoder::kTaehvDraft) return decode_draft(ctx);
        return decode(ctx);
      case StageKind::kWrite:
        break;
    }
    throw Error(ErrorCode::kInternal, "Wan has no " + std::string(stage_key(stage)) + " stage");
  }

 private:
  // The prompt and the negative prompt, tokenized and encoded together (umT5 streamed); the
  // prompt alone when the guide scale turns guidance off.
  void encode_text(RunContext& ctx) {
    const ModelSet& set = parts_.set();
    const umt5::Tokenizer tokenizer = set.tokenizer_embedded()
                                          ? umt5::Tokenizer::from_checkpoint(parts_.text_encoder())
                                          : umt5::Tokenizer::from_model_file(set.tokenizer_model);
    std::vector<std::vector<std::int32_t>> prompts = {tokenizer.tokenize(r_.request.prompt).ids};
    if (guidance_enabled(r_.guide_scale)) {
      prompts.push_back(tokenizer.tokenize(r_.negative_prompt).ids);
    }
    const auto weights = umt5::EncoderWeights::from(parts_.text_encoder());
    const offload::ModelLayout layout = weights.model_layout();
    offload::StreamerOptions streamer_options = ctx.streamer;
    streamer_options.passes = 1;
    offload::WeightStreamer streamer(ctx.backend, layout, stage_plan(plan_, kTextStage).plan,
                                     streamer_options);
    const auto watch = ctx.cancel.watch(streamer);
    const auto arena_bytes =
        static_cast<std::size_t>(weights.activation_bytes(umt5::prompt_lengths(prompts)));
    const auto arena_memory = ctx.backend.allocate(arena_bytes);
    memory::Arena arena(arena_memory->data(), arena_bytes, ctx.backend.device());
    text_ =
        umt5::encode(ctx.backend, weights, streamer, arena, prompts, &ctx.cancel.flag()).embeddings;
    if (ctx.text_state) {
      const char* names[] = {"context", "negative_context"};
      for (std::size_t i = 0; i < text_.size(); ++i) {
        const umt5::TextEmbedding& e = text_[i];
        ctx.text_state({names[i],
                        DType::kBF16,
                        {static_cast<std::uint64_t>(e.rows), static_cast<std::uint64_t>(e.dim)},
                        std::as_bytes(std::span(e.bf16))});
      }
    }
  }

  // The start image as the official code prepares it (wan.md §B.8), encoded to z0 [z, 1, h, w];
  // for A14B I2V the conditioning video of both images (i2v.h), encoded to y.
  void encode_image(RunContext& ctx) {
    const VaeEncodePlan& plan =
        std::any_cast<const VaeEncodePlan&>(stage_plan(plan_, kImageStage).family_plan);
    Backend& backend = ctx.backend;
    const VaeWeights weights = VaeWeights::load(backend, parts_.vae());
    WanVae vae(backend, weights, VaeOptions{plan.activations});
    std::vector<float> pixels =
        conditioned_on_video() ? conditioning_video() : start_image_pixels();
    const std::int64_t frames = conditioned_on_video() ? r_.frames : 1;
    DeviceTensor video = device_tensor(backend, DType::kF32, Shape{3, frames, r_.height, r_.width});
    backend.upload(video.tensor, pixels.data());
    pixels = {};
    const std::int64_t z = weights.config().z_dim;
    DeviceTensor latent =
        device_tensor(backend, DType::kF32,
                      Shape{z, vae_latent_frames(frames), r_.latent_height, r_.latent_width});
    const auto arena_memory = backend.allocate(static_cast<std::size_t>(plan.arena_bytes));
    memory::Arena arena(arena_memory->data(), static_cast<std::size_t>(plan.arena_bytes),
                        backend.device());
    if (plan.tiling.tile > 0) {
      encode_tiled(vae, backend, video.tensor, arena, plan.tiling, latent.tensor);
    } else {
      vae.encode(video.tensor, arena, latent.tensor);
    }
    std::vector<float> encoded(static_cast<std::size_t>(latent.tensor.numel()));
    backend.download(latent.tensor, encoded.data());
    if (conditioned_on_video()) {
      y_ = i2v_condition(
          i2v_mask(r_.frames, r_.latent_height, r_.latent_width, images_.end.has_value()), encoded);
    } else {
      z0_ = std::move(encoded);
    }
  }

  // A14B I2V: the DiT reads the conditioning video's latent (TI2V: the start image's, in frame 0).
  bool conditioned_on_video() const { return parts_.set().dit_config.in_dim == kI2V_A14B.in_dim; }

  // TI2V: the start image resized and centre-cropped to the video's size, to [-1, 1], planar.
  std::vector<float> start_image_pixels() const {
#if defined(FERRY_HAVE_FFMPEG)
    const media::RgbImage fitted =
        media::resize_and_center_crop(*images_.start, r_.width, r_.height);
#else
    // Builds without FFmpeg read no images, so no run of theirs has one.
    const media::RgbImage& fitted = *images_.start;
    throw Error(ErrorCode::kUnsupported, "this build of Ferry reads no images (no FFmpeg)");
#endif
    const std::size_t plane = static_cast<std::size_t>(r_.width) * r_.height;
    std::vector<float> pixels(3 * plane);
    for (std::size_t i = 0; i < plane; ++i) {
      for (std::size_t c = 0; c < 3; ++c) {
        pixels[c * plane + i] = (fitted.rgb[i * 3 + c] / 255.0f - 0.5f) / 0.5f;
      }
    }
    return pixels;
  }

  // A14B I2V: [start, zeros…, end] at the video's size, each image bicubic-resized (no crop).
  std::vector<float> conditioning_video() const {
    const std::vector<float> start = bicubic_resize(*images_.start, r_.width, r_.height);
    const std::vector<float> end =
        images_.end ? bicubic_resize(*images_.end, r_.width, r_.height) : std::vector<float>{};
    return i2v_conditioning_video(start, end, r_.frames, r_.width, r_.height);
  }

  // The sampler's steps, each a CFG pair of DiT passes on every loaded block (the conditional
  // pass alone without guidance; the DiT streamed under the plan), a telemetry step and a preview
  // each. Two experts run one after the other, the first released before the second is built.
  void denoise_latent(RunContext& ctx) {
    latent_.resize(grid_.size());
    if (ctx.initial_noise) {
      ctx.initial_noise("noise", latent_);
    } else {
      normal_noise(r_.request.seed, 0, latent_);
    }
    if (ctx.noise_used) ctx.noise_used("noise", latent_);
    if (!z0_.empty()) ti2v_insert_frame0(grid_, z0_, latent_);

    const DenoiseSettings settings = denoise_settings(ctx);
    const std::array<int, 2> passes = expert_steps(settings);
    std::vector<DeviceTensor> contexts;
    for (const umt5::TextEmbedding& e : text_) {
      contexts.push_back(device_tensor(ctx.backend, DType::kBF16, Shape{e.rows, e.dim}));
      ctx.backend.upload(contexts.back().tensor, e.bf16.data());
    }
    std::vector<Tensor> context_tensors;
    for (const DeviceTensor& c : contexts) context_tensors.push_back(c.tensor);

    std::unique_ptr<ExpertWeights> expert;
    const auto next_expert = [&](int e) {
      expert.reset();  // every byte of the previous expert is released first
      ctx.telemetry.set_phase(parts_.set().two_experts()
                                  ? std::string(dit_stage_name(parts_.set(), e))
                                  : std::string());
      expert =
          std::make_unique<ExpertWeights>(parts_, r_, plan_, e, passes[e], ctx,
                                          static_cast<std::int64_t>(contexts.size()), !z0_.empty());
      return expert->pass();
    };

    // With a TAEHV file, previews are pictures (one latent frame of x0, taehv_preview.h), kept
    // under 5% of the step time; without one, the colour sketch of latent_preview.
    std::unique_ptr<taehv::TaehvPreview> pictures;
    if (ctx.preview && parts_.preview_decoder() != nullptr) {
      pictures = std::make_unique<taehv::TaehvPreview>(
          ctx.backend, *parts_.preview_decoder(), grid_.channels, grid_.frames, grid_.height,
          grid_.width, static_cast<bool>(ctx.preview_frames));
    }
    taehv::PreviewBudget preview_budget;

    offload::StreamStats before;
    Clock::time_point step_start;
    DenoiseHooks hooks;
    hooks.before_step = [&](int) {
      ctx.cancel.throw_if_cancelled();
      before = expert->stats();
      ctx.telemetry.begin_step();
      step_start = Clock::now();
    };
    hooks.after_step = [&](int, std::span<const float> x0) {
      const offload::StreamStats after = expert->stats();
      const double wait = after.acquire_wait_seconds - before.acquire_wait_seconds;
      const double step_seconds = seconds_since(step_start);
      const double compute = step_seconds - wait;
      // The preview is measured against the step before it; its own time is in the step's
      // seconds (the telemetry's wall time), not in its compute.
      if (pictures && preview_budget.due(step_seconds)) {
        const Clock::time_point start = Clock::now();
        const media::RgbImage image = pictures->decode(x0);
        std::vector<media::RgbImage> frames;
        if (ctx.preview_frames) frames = pictures->decode_all(x0);
        const double cost = seconds_since(start);
        preview_budget.spent(cost);
        ctx.telemetry.note_preview(cost, false);
        ctx.preview(image);
        if (ctx.preview_frames) ctx.preview_frames(frames);
      } else if (pictures) {
        ctx.telemetry.note_preview(0, true);
      }
      ctx.telemetry.end_step(compute, wait, after.bytes_read - before.bytes_read);
      if (ctx.preview && !pictures) ctx.preview(latent_preview(x0, grid_));
    };
    denoise(ctx.backend, next_expert, context_tensors, grid_, DenoiseConditioning{z0_, y_},
            settings, latent_, hooks);
    expert.reset();
    ctx.telemetry.set_phase({});
    text_.clear();
    text_.shrink_to_fit();
    y_ = {};
    if (ctx.final_latent) ctx.final_latent("latent", latent_);
  }

  DenoiseSettings denoise_settings(const RunContext& ctx) const {
    DenoiseSettings settings;
    settings.steps = r_.steps;
    settings.shift = r_.shift;
    settings.sampler = *parse_sampler_kind(r_.sampler);  // resolve() checked the name
    settings.guide_scale = r_.guide_scale;
    settings.low_noise_guide_scale = r_.low_noise_guide_scale;
    settings.boundary = parts_.set().two_experts() ? parts_.rules().expert_boundary : 0.0;
    settings.chunk_tokens = ctx.preset.chunk_tokens;
    return settings;
  }

  // The latent a run saved (the request's latents file, read and checked by the pipeline).
  void read_saved_latent(RunContext& ctx) {
    if (!ctx.saved_latent) {
      throw Error(ErrorCode::kInternal, "the run was given no saved latents to decode");
    }
    latent_.resize(grid_.size());
    ctx.saved_latent("latent", latent_);
  }

  // The draft: TAEHV decodes the latent a frame at a time at the video's full size
  // (taehv_draft.h), frames handed to the pipeline as they come, in [-1, 1] as the VAE's are.
  void decode_draft(RunContext& ctx) {
    const auto& plan = std::any_cast<const taehv::TaehvDraftPlan&>(
        stage_plan(plan_, kDraftDecodeStage).family_plan);
    taehv::TaehvDraft draft(ctx.backend, *parts_.preview_decoder(), plan, grid_.channels,
                            grid_.frames, grid_.height, grid_.width);
    std::vector<float> frame;
    for (std::int64_t t = 0; t < grid_.frames; ++t) {
      ctx.cancel.throw_if_cancelled();
      draft.push(latent_, t, [&](std::span<const float> pixels) {
        frame.resize(pixels.size());
        std::transform(pixels.begin(), pixels.end(), frame.begin(),
                       [](float v) { return v * 2.0f - 1.0f; });
        ctx.frames(1, frame);
      });
    }
  }

  // The VAE decode as its plan says (untiled chunks, chunk-major tiles, or whole), frames handed
  // to the pipeline as they come.
  void decode(RunContext& ctx) {
    const VaePlan& plan =
        std::any_cast<const VaePlan&>(stage_plan(plan_, kDecodeStage).family_plan);
    Backend& backend = ctx.backend;
    const VaeWeights weights = VaeWeights::load(backend, parts_.vae());
    WanVae vae(backend, weights, VaeOptions{plan.activations});
    DeviceTensor z = device_tensor(backend, DType::kF32,
                                   Shape{grid_.channels, grid_.frames, grid_.height, grid_.width});
    backend.upload(z.tensor, latent_.data());
    const auto arena_memory = backend.allocate(static_cast<std::size_t>(plan.arena_bytes));
    memory::Arena arena(arena_memory->data(), static_cast<std::size_t>(plan.arena_bytes),
                        backend.device());
    switch (plan.mode) {
      case VaeDecodeMode::kUntiled: {
        std::vector<float> chunk;
        vae.decode_chunks(z.tensor, arena, [&](std::int64_t, const Tensor& pixels) {
          chunk.resize(static_cast<std::size_t>(pixels.numel()));
          backend.download(pixels, chunk.data());
          ctx.frames(pixels.shape[1], chunk);
        });
        break;
      }
      case VaeDecodeMode::kTiledStreamed:
        decode_tiled_chunks(vae, z.tensor, arena, plan.tiling, plan.caches,
                            [&](std::int64_t, const Shape& shape, std::span<const float> pixels) {
                              ctx.frames(shape[1], pixels);
                            });
        break;
      case VaeDecodeMode::kTiledWhole: {
        const std::size_t plane = static_cast<std::size_t>(r_.width) * r_.height;
        std::vector<float> pixels(3 * static_cast<std::size_t>(r_.frames) * plane);
        decode_tiled(vae, backend, z.tensor, arena, plan.tiling, pixels);
        ctx.frames(r_.frames, pixels);
        break;
      }
    }
  }

  const WanParts& parts_;
  const ResolvedRequest r_;
  const GenerationPlan& plan_;
  const FrameImages images_;
  const LatentGrid grid_;
  std::vector<umt5::TextEmbedding> text_;
  std::vector<float> z0_;  // TI2V image-to-video: the start image's latent
  std::vector<float> y_;   // A14B I2V: the mask and the conditioning video's latent
  std::vector<float> latent_;
};

}  // namespace

std::unique_ptr<FamilyRun> WanParts::start(const ResolvedRequest& request,
                                           const GenerationPlan& plan, FrameImages images) const {
  return std::make_unique<WanRun>(*this, request, plan, std::move(images));
}

}  // namespace ferry::models::wan
