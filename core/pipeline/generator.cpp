#include "core/pipeline/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/partial_file.h"
#include "core/io/safetensors_set.h"
#include "core/media/video_writer.h"
#include "core/memory/arena.h"
#include "core/models/umt5/encoder.h"
#include "core/models/umt5/tokenizer.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/ti2v.h"
#include "core/models/wan/vae.h"
#include "core/models/wan/vae_tiling.h"
#include "core/offload/planner.h"
#include "core/offload/vae_plan.h"
#include "core/pipeline/denoise.h"
#include "core/pipeline/noise.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;
namespace wan = models::wan;
namespace umt5 = models::umt5;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A backend allocation with a tensor over it.
struct DeviceTensor {
  std::unique_ptr<DeviceBuffer> memory;
  Tensor tensor;
};

DeviceTensor device_tensor(Backend& backend, DType dtype, const Shape& shape) {
  DeviceTensor t;
  t.memory = backend.allocate(static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  t.tensor = Tensor{t.memory->data(), dtype, shape, backend.device()};
  return t;
}

// ---- text ----

std::vector<umt5::TextEmbedding> encode_text(Backend& backend, const ModelSet& set,
                                             const ResolvedRequest& r,
                                             const offload::Preset& preset,
                                             const offload::MachineInfo& machine,
                                             const std::atomic<bool>& cancelled,
                                             const GeneratorOptions& generator_options) {
  const io::SafetensorsSet weights_set = io::SafetensorsSet::open(set.text_encoder);
  const umt5::Tokenizer tokenizer = set.tokenizer_embedded()
                                        ? umt5::Tokenizer::from_checkpoint(weights_set)
                                        : umt5::Tokenizer::from_model_file(set.tokenizer_model);
  const std::vector<std::vector<std::int32_t>> prompts = {
      tokenizer.tokenize(r.request.prompt).ids, tokenizer.tokenize(r.negative_prompt).ids};
  const auto weights = umt5::EncoderWeights::from(weights_set);
  const offload::ModelLayout layout = weights.model_layout();
  const offload::Plan plan = generator_options.stream_all
                                 ? offload::streamed_plan(layout, preset)
                                 : offload::make_plan(layout, preset, machine);
  umt5::EncodeOptions options;
  options.streamer = generator_options.streamer;
  options.cancel = &cancelled;
  return umt5::encode(backend, weights, plan, prompts, options).embeddings;
}

// ---- image ----

// The start image as the official code prepares it (§B.8), encoded to z0 [z, 1, h, w].
std::vector<float> encode_image(Backend& backend, const ModelSet& set, const ResolvedRequest& r,
                                const offload::Preset& preset, const media::RgbImage& image) {
#if defined(FERRY_HAVE_FFMPEG)
  const media::RgbImage fitted = media::resize_and_center_crop(image, r.width, r.height);
  const std::size_t plane = static_cast<std::size_t>(r.width) * r.height;
  std::vector<float> pixels(3 * plane);
  for (std::size_t i = 0; i < plane; ++i) {
    for (std::size_t c = 0; c < 3; ++c) {
      pixels[c * plane + i] = (fitted.rgb[i * 3 + c] / 255.0f - 0.5f) / 0.5f;
    }
  }
  const io::SafetensorsSet vae_set = io::SafetensorsSet::open(set.vae);
  const wan::VaeWeights weights = wan::VaeWeights::load(backend, vae_set);
  const wan::VaeOptions options{preset.vae_activations};
  wan::WanVae vae(backend, weights, options);
  DeviceTensor video = device_tensor(backend, DType::kF32, Shape{3, 1, r.height, r.width});
  backend.upload(video.tensor, pixels.data());
  const std::int64_t z = weights.config().z_dim;
  DeviceTensor latent =
      device_tensor(backend, DType::kF32, Shape{z, 1, r.latent_height, r.latent_width});
  const std::size_t arena_bytes =
      wan::WanVae::encode_arena_bytes(weights, 1, r.height, r.width, options);
  const auto arena_memory = backend.allocate(arena_bytes);
  memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());
  vae.encode(video.tensor, arena, latent.tensor);
  std::vector<float> z0(static_cast<std::size_t>(latent.tensor.numel()));
  backend.download(latent.tensor, z0.data());
  return z0;
#else
  (void)backend, (void)set, (void)r, (void)preset, (void)image;
  throw Error(ErrorCode::kUnsupported, "this build of Ferry reads no images (no FFmpeg)");
#endif
}

// ---- preview ----

// The first frame of a latent [C, T, h, w] as RGB: the channels in three groups, each group's
// mean one colour, stretched to the frame's range. Cheap, and it shows the composition forming.
media::RgbImage latent_preview(std::span<const float> latent, const wan::LatentGrid& g) {
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

// ---- metadata ----

nlohmann::json settings_json(const ResolvedRequest& r, const ModelSet& set,
                             const offload::Preset& preset) {
  nlohmann::json j;
  j["prompt"] = r.request.prompt;
  j["negative_prompt"] = r.negative_prompt;
  j["seed"] = r.request.seed;
  j["width"] = r.width;
  j["height"] = r.height;
  j["frames"] = r.frames;
  j["fps"] = r.fps;
  j["steps"] = r.steps;
  j["guide_scale"] = r.guide_scale;
  j["shift"] = r.shift;
  j["sampler"] = std::string(wan::to_string(r.sampler));
  j["preset"] = preset.name;
  j["model"] = std::string(set.dit_config.name);
  j["model_files"] = {io::detail::display(set.dit), io::detail::display(set.text_encoder),
                      io::detail::display(set.vae)};
  if (r.request.image) j["image"] = io::detail::display(*r.request.image);
  j["ferry_version"] = FERRY_VERSION;
  return j;
}

}  // namespace

std::string_view stage_name(Stage stage) {
  switch (stage) {
    case Stage::kText:
      return "encoding the prompt";
    case Stage::kImage:
      return "encoding the start image";
    case Stage::kDenoise:
      return "denoising";
    case Stage::kDecode:
      return "decoding the video";
    case Stage::kWrite:
      return "writing the video";
  }
  return "?";
}

Generator::Generator(Backend& backend, offload::MachineInfo machine,
                     std::vector<offload::Preset> presets, GeneratorOptions options)
    : backend_(backend),
      machine_(machine),
      presets_(std::move(presets)),
      options_(std::move(options)) {}

void Generator::cancel() {
  cancelled_ = true;
  std::lock_guard lock(active_mutex_);
  if (active_ != nullptr) active_->cancel();
}

void Generator::set_active(offload::WeightStreamer* streamer) {
  std::lock_guard lock(active_mutex_);
  active_ = streamer;
  if (streamer != nullptr && cancelled_) streamer->cancel();
}

void Generator::check_cancelled() const {
  if (cancelled_) throw Error(ErrorCode::kCancelled, "generation cancelled");
}

GenerationResult Generator::generate(const GenerationRequest& request, ProgressSink& sink) {
  cancelled_ = false;
  const ModelSet set = find_model_set(request.model);
  const offload::Preset preset = offload::find_preset(presets_, request.preset, machine_);

  std::optional<media::RgbImage> image;
  if (request.image) {
#if defined(FERRY_HAVE_FFMPEG)
    image = media::load_image(*request.image);
#else
    throw Error(ErrorCode::kUnsupported, "this build of Ferry reads no images (no FFmpeg)");
#endif
  }
  const ResolvedRequest r = resolve(
      request, set, image ? std::optional(std::pair(image->width, image->height)) : std::nullopt);
  GenerationResult result;
  result.settings = r;

  // Every stage is planned before any work starts, so a budget that cannot hold one of them is
  // refused at once (each stage still allocates only when it runs).
  const io::SafetensorsSet dit_set = io::SafetensorsSet::open(set.dit);
  const offload::ModelLayout dit_layout =
      wan::dit_model_layout(dit_set, r.width, r.height, r.frames, preset.ffn_chunk_tokens);
  const offload::Plan dit_plan = options_.stream_all
                                     ? offload::streamed_plan(dit_layout, preset)
                                     : offload::make_plan(dit_layout, preset, machine_);
  const offload::VaePlan vae_plan = [&] {
    const io::SafetensorsSet vae_set = io::SafetensorsSet::open(set.vae);
    return offload::make_vae_plan(wan::VaeWeights::shapes_only(vae_set), preset, machine_, r.width,
                                  r.height, r.frames);
  }();
  result.peak_device_bytes = std::max(dit_plan.predicted_vram_peak, vae_plan.predicted_vram_peak);

  // Telemetry: a line per step and per stage to the stats file, steps to the sink.
  std::ofstream jsonl;
  if (!request.stats_jsonl.empty()) {
    jsonl.open(request.stats_jsonl, std::ios::binary | std::ios::trunc);
    if (!jsonl) {
      throw Error(ErrorCode::kIo,
                  "cannot write the stats file " + io::detail::display(request.stats_jsonl));
    }
  }
  Clock::time_point denoise_start;
  offload::Telemetry telemetry(
      options_.device_memory,
      [&](const offload::StepStats& s) {
        StepProgress p;
        p.step = s.step;
        p.steps = r.steps;
        p.seconds_per_step = seconds_since(denoise_start) / s.step;
        p.eta_seconds = p.seconds_per_step * (r.steps - s.step);
        p.stats = s;
        sink.step(p);
      },
      jsonl.is_open() ? &jsonl : nullptr);
  const auto begin_stage = [&](Stage stage, const char* name) {
    sink.stage(stage);
    telemetry.begin_stage(name);
  };
  const auto end_stage = [&] { result.stages.push_back(telemetry.end_stage()); };

  // ---- text ----
  begin_stage(Stage::kText, "text");
  const std::vector<umt5::TextEmbedding> text =
      encode_text(backend_, set, r, preset, machine_, cancelled_, options_);
  end_stage();
  check_cancelled();

  const wan::LatentGrid grid{static_cast<int>(set.dit_config.in_dim),
                             static_cast<int>(r.latent_frames), static_cast<int>(r.latent_height),
                             static_cast<int>(r.latent_width)};

  // ---- image ----
  std::vector<float> z0;
  if (image) {
    begin_stage(Stage::kImage, "image");
    z0 = encode_image(backend_, set, r, preset, *image);
    end_stage();
    check_cancelled();
  }

  // ---- denoise ----
  begin_stage(Stage::kDenoise, "denoise");
  std::vector<float> latent(grid.size());
  if (options_.initial_noise) {
    options_.initial_noise(latent);
  } else {
    normal_noise(request.seed, 0, latent);
  }
  if (image) wan::ti2v_insert_frame0(grid, z0, latent);
  {
    const offload::ModelLayout& layout = dit_layout;
    const offload::Plan& plan = dit_plan;
    wan::WanDit dit(backend_, dit_set, layout);
    offload::StreamerOptions streamer_options = options_.streamer;
    streamer_options.passes = static_cast<std::size_t>(r.steps);
    offload::WeightStreamer streamer(backend_, layout, plan, streamer_options);
    set_active(&streamer);
    struct Deactivate {
      Generator* g;
      ~Deactivate() { g->set_active(nullptr); }
    } deactivate{this};

    const std::int64_t tokens = static_cast<std::int64_t>(grid.tokens());
    const std::size_t arena_bytes = static_cast<std::size_t>(wan::dit_activation_bytes(
        set.dit_config, tokens, preset.ffn_chunk_tokens, 2, image ? 2 : 1));
    const auto arena_memory = backend_.allocate(arena_bytes);
    memory::Arena arena(arena_memory->data(), arena_bytes, backend_.device());

    std::vector<DeviceTensor> contexts;
    for (const umt5::TextEmbedding& e : text) {
      contexts.push_back(device_tensor(backend_, DType::kBF16, Shape{e.rows, e.dim}));
      backend_.upload(contexts.back().tensor, e.bf16.data());
    }
    const Tensor context_tensors[2] = {contexts[0].tensor, contexts[1].tensor};

    offload::StreamStats before;
    Clock::time_point step_start;
    DenoiseHooks hooks;
    hooks.before_step = [&](int) {
      check_cancelled();
      before = streamer.stats();
      telemetry.begin_step();
      step_start = Clock::now();
    };
    hooks.after_step = [&](int, std::span<const float> x0) {
      const offload::StreamStats after = streamer.stats();
      const double wait = after.acquire_wait_seconds - before.acquire_wait_seconds;
      result.steps.push_back(telemetry.end_step(seconds_since(step_start) - wait, wait,
                                                after.bytes_read - before.bytes_read));
      sink.preview(latent_preview(x0, grid));
    };
    DenoiseSettings settings;
    settings.steps = r.steps;
    settings.shift = r.shift;
    settings.sampler = r.sampler;
    settings.guide_scale = r.guide_scale;
    settings.ffn_chunk_tokens = preset.ffn_chunk_tokens;
    denoise_start = Clock::now();
    denoise(backend_, dit, streamer, arena, context_tensors, grid, z0, settings, latent, hooks);
  }
  end_stage();
  if (options_.final_latent) options_.final_latent(latent);
  check_cancelled();

  // ---- decode, frames written as they come ----
  begin_stage(Stage::kDecode, "decode");
  const nlohmann::json settings = settings_json(r, set, preset);
  media::VideoSettings video;
  video.width = r.width;
  video.height = r.height;
  video.fps = r.fps;
  video.metadata = {
      {"title", r.request.prompt}, {"comment", settings.dump()}, {"ferry_version", FERRY_VERSION}};
  media::VideoWriter writer(request.output, video);
  const std::size_t plane = static_cast<std::size_t>(r.width) * r.height;
  media::RgbImage frame{r.width, r.height, std::vector<std::uint8_t>(plane * 3)};
  // pixels [3, n, H, W] → n frames. The official conversion: clamp to [-1, 1], to [0, 1], ×255,
  // truncated to uint8.
  std::int64_t frames_decoded = 0;
  const auto write_frames = [&](std::int64_t n, std::span<const float> pixels) {
    if (options_.decoded_frames) options_.decoded_frames(frames_decoded, n, pixels);
    frames_decoded += n;
    const std::size_t frame_stride = static_cast<std::size_t>(n) * plane;
    for (std::int64_t f = 0; f < n; ++f) {
      check_cancelled();
      for (std::size_t i = 0; i < plane; ++i) {
        for (std::size_t c = 0; c < 3; ++c) {
          const float v = std::clamp(pixels[c * frame_stride + f * plane + i], -1.0f, 1.0f);
          frame.rgb[i * 3 + c] = static_cast<std::uint8_t>((v + 1.0f) / 2.0f * 255.0f);
        }
      }
      writer.write(frame);
    }
  };
  {
    const io::SafetensorsSet vae_set = io::SafetensorsSet::open(set.vae);
    const wan::VaeWeights weights = wan::VaeWeights::load(backend_, vae_set);
    wan::WanVae vae(backend_, weights, wan::VaeOptions{vae_plan.activations});
    DeviceTensor z = device_tensor(backend_, DType::kF32,
                                   Shape{grid.channels, grid.frames, grid.height, grid.width});
    backend_.upload(z.tensor, latent.data());
    const auto arena_memory = backend_.allocate(static_cast<std::size_t>(vae_plan.arena_bytes));
    memory::Arena arena(arena_memory->data(), static_cast<std::size_t>(vae_plan.arena_bytes),
                        backend_.device());
    switch (vae_plan.mode) {
      case offload::VaeDecodeMode::kUntiled: {
        std::vector<float> chunk;
        vae.decode_chunks(z.tensor, arena, [&](std::int64_t, const Tensor& pixels) {
          chunk.resize(static_cast<std::size_t>(pixels.numel()));
          backend_.download(pixels, chunk.data());
          write_frames(pixels.shape[1], chunk);
        });
        break;
      }
      case offload::VaeDecodeMode::kTiledStreamed:
        wan::decode_tiled_chunks(
            vae, z.tensor, arena, vae_plan.tiling, vae_plan.caches,
            [&](std::int64_t, const Shape& shape, std::span<const float> pixels) {
              write_frames(shape[1], pixels);
            });
        break;
      case offload::VaeDecodeMode::kTiledWhole: {
        std::vector<float> pixels(3 * static_cast<std::size_t>(r.frames) * plane);
        wan::decode_tiled(vae, backend_, z.tensor, arena, vae_plan.tiling, pixels);
        write_frames(r.frames, pixels);
        break;
      }
    }
  }
  check_cancelled();

  // ---- write ----
  sink.stage(Stage::kWrite);
  writer.finish();
  end_stage();
  result.encoder = writer.encoder();
  result.video = request.output;
  result.sidecar = fs::path(request.output).replace_extension(".json");
  const std::string sidecar = settings.dump(2) + "\n";
  io::write_file_atomically(result.sidecar, std::as_bytes(std::span(sidecar)));
  return result;
}

}  // namespace ferry::pipeline
