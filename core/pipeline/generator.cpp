#include "core/pipeline/generator.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/fingerprint.h"
#include "core/io/partial_file.h"
#include "core/media/video_writer.h"
#include "core/pipeline/replay.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

// Every setting a clip needs to be made again, for its metadata and sidecar. Model files are
// named by file name, size and fingerprint only: a shared clip must not carry the user's folders.
nlohmann::json settings_json(const ResolvedRequest& r, const models::ModelParts& parts,
                             const offload::Preset& preset, const fs::path& latents_kept) {
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
  if (r.request.low_noise_guide_scale || r.low_noise_guide_scale != r.guide_scale) {
    j["low_noise_guide_scale"] = r.low_noise_guide_scale;
  }
  j["shift"] = r.shift;
  j["sampler"] = r.sampler;
  j["preset"] = preset.name;
  j["family"] = std::string(parts.family());
  j["model"] = parts.name();
  nlohmann::json files = nlohmann::json::array();
  for (const models::PartFile& f : parts.files()) {
    files.push_back({{"role", f.role},
                     {"name", io::detail::display(f.path.filename())},
                     {"bytes", f.bytes},
                     {"fingerprint", io::file_fingerprint(f.path)}});
  }
  j["model_files"] = std::move(files);
  if (!r.request.loras.empty()) {
    nlohmann::json loras = nlohmann::json::array();
    for (const models::LoraChoice& l : r.request.loras) {
      loras.push_back({{"name", io::detail::display(l.path.filename())},
                       {"bytes", static_cast<std::uint64_t>(fs::file_size(l.path))},
                       {"fingerprint", io::file_fingerprint(l.path)},
                       {"strength", l.strength}});
    }
    j["loras"] = std::move(loras);
  }
  if (r.request.image) j["image"] = io::detail::display(r.request.image->filename());
  if (r.request.end_image) j["end_image"] = io::detail::display(r.request.end_image->filename());
  if (r.request.decoder == models::VideoDecoder::kTaehvDraft) {
    // A draft: decoded by TAEHV, softer than the VAE's; its latents kept for a full decode.
    j["decode"] = "taehv-draft";
  }
  if (!latents_kept.empty()) j["latents_kept"] = io::detail::display(latents_kept.filename());
  if (!r.request.latents.empty()) {
    j["latents_file"] = {{"name", io::detail::display(r.request.latents.filename())},
                         {"fingerprint", io::file_fingerprint(r.request.latents)}};
  }
  if (!r.request.noise.empty()) {
    j["noise_file"] = {{"name", io::detail::display(r.request.noise.filename())},
                       {"fingerprint", io::file_fingerprint(r.request.noise)}};
  }
  j["ferry_version"] = FERRY_VERSION;
  return j;
}

// The video, opened when the first frames arrive: decoded pixels [3, n, H, W] in [-1, 1] become
// 8-bit frames the official way (clamp, to [0, 1], ×255, truncated).
class FrameWriter {
 public:
  FrameWriter(const ResolvedRequest& r, const nlohmann::json& settings,
              const GeneratorOptions& options, const offload::CancelToken& cancel)
      : r_(r), settings_(settings), options_(options), cancel_(cancel) {}

  void write(std::int64_t n, std::span<const float> pixels) {
    if (!writer_) open();
    if (options_.decoded_frames) options_.decoded_frames(frames_written_, n, pixels);
    frames_written_ += n;
    const std::size_t plane = static_cast<std::size_t>(r_.width) * r_.height;
    const std::size_t frame_stride = static_cast<std::size_t>(n) * plane;
    for (std::int64_t f = 0; f < n; ++f) {
      cancel_.throw_if_cancelled();
      for (std::size_t i = 0; i < plane; ++i) {
        for (std::size_t c = 0; c < 3; ++c) {
          const float v = std::clamp(pixels[c * frame_stride + f * plane + i], -1.0f, 1.0f);
          frame_.rgb[i * 3 + c] = static_cast<std::uint8_t>((v + 1.0f) / 2.0f * 255.0f);
        }
      }
      writer_->write(frame_);
    }
  }

  // The soundtrack the video opens with (before the first frame: the writer takes it when it
  // opens).
  void set_soundtrack(media::AudioTrack track) {
    if (writer_) {
      throw Error(ErrorCode::kInternal, "a soundtrack came after the video's first frames");
    }
    soundtrack_ = std::move(track);
  }

  // Frames were written and the file is not finished yet.
  bool pending() const { return writer_.has_value() && !finished_; }
  // Completes the file (renamed from its temporary name); returns the encoder's name.
  std::string finish() {
    writer_->finish();
    finished_ = true;
    return writer_->encoder();
  }

 private:
  void open() {
    media::VideoSettings video;
    video.width = r_.width;
    video.height = r_.height;
    video.fps = r_.fps;
    video.metadata = {{"title", r_.request.prompt},
                      {"comment", settings_.dump()},
                      {"ferry_version", FERRY_VERSION}};
    video.audio = std::move(soundtrack_);
    video.soundtrack_wav = r_.request.soundtrack_wav;
    writer_.emplace(r_.request.output, video);
    frame_ = media::RgbImage{
        r_.width, r_.height,
        std::vector<std::uint8_t>(static_cast<std::size_t>(r_.width) * r_.height * 3)};
  }

  const ResolvedRequest& r_;
  const nlohmann::json& settings_;
  const GeneratorOptions& options_;
  const offload::CancelToken& cancel_;
  std::optional<media::VideoWriter> writer_;
  media::RgbImage frame_;
  media::AudioTrack soundtrack_;
  std::int64_t frames_written_ = 0;
  bool finished_ = false;
};

std::optional<media::RgbImage> load_frame_image(const std::optional<std::filesystem::path>& path) {
  if (!path) return std::nullopt;
#if defined(FERRY_HAVE_FFMPEG)
  return media::load_image(*path);
#else
  throw Error(ErrorCode::kUnsupported, "this build of Ferry reads no images (no FFmpeg)");
#endif
}

}  // namespace

fs::path draft_latents_path(const fs::path& video) {
  return fs::path(video).replace_extension(".latents.safetensors");
}

void check_decode_request(const models::ModelParts& parts, const GenerationRequest& request) {
  const models::RequestRules rules = parts.rules();
  if (request.decoder == models::VideoDecoder::kTaehvDraft && !rules.draft_decode) {
    throw Error(ErrorCode::kBadArgument,
                "the model " + parts.name() + " has no draft decoder: decode with its VAE");
  }
  if (request.latents.empty()) return;
  if (!rules.decodes_saved_latents) {
    throw Error(ErrorCode::kBadArgument,
                "the model " + parts.name() + " cannot decode saved latents: generate instead");
  }
  const auto refuse = [](const char* option) {
    throw Error(ErrorCode::kBadArgument, std::string("--latents decodes saved latents without "
                                                     "denoising; ") +
                                             option + " belongs to a run that denoises");
  };
  if (!request.noise.empty()) refuse("--noise");
  if (!request.save_noise.empty()) refuse("--save-noise");
  if (!request.save_latents.empty()) refuse("--save-latents");
  if (request.save_text_states) refuse("--save-text-states");
}

GenerationResult generate(Backend& backend, const offload::MachineInfo& machine,
                          const offload::Preset& preset, const models::ModelParts& parts,
                          const GenerationRequest& request, ProgressSink& sink,
                          offload::CancelToken& cancel, const GeneratorOptions& options) {
  cancel.throw_if_cancelled();
  models::check_run_inputs(request);
  models::check_end_image(request, parts.rules(), parts.name());
  models::FrameImages images{load_frame_image(request.image), load_frame_image(request.end_image)};
  // The canvas follows the keyframe given: the start image, else the end image (H3's I2VA from
  // the last frame; a family that needs a start image refuses the end image alone).
  const std::optional<media::RgbImage>& image = images.start ? images.start : images.end;
  const ResolvedRequest r = parts.resolve(
      request, image ? std::optional(std::pair(image->width, image->height)) : std::nullopt);
  GenerationResult result;
  result.settings = r;
  result.model = parts.name();
  result.preset = preset.name;
  check_decode_request(parts, request);

  // Every stage is planned before any work starts, so a budget that cannot hold one of them is
  // refused at once (each stage still allocates only when it runs).
  const models::GenerationPlan plan = parts.plan(r, preset, machine, options.stream_all);
  // Replays: the noise file read and checked, the outputs' folders checked, before any work.
  const std::vector<models::TensorLayout> noise_layout = parts.noise_layout(r);
  const std::vector<models::TensorLayout> latent_layout = parts.latent_layout(r);
  std::vector<std::vector<float>> noise_from_file, latents_from_file;
  if (!request.noise.empty()) noise_from_file = read_noise(request.noise, noise_layout);
  if (!request.latents.empty()) {
    latents_from_file = read_replay_tensors(request.latents, latent_layout, "--latents");
  }
  // A draft keeps its latents beside the video unless asked to write them elsewhere (a draft of
  // saved latents has them already).
  const bool draft = request.decoder == models::VideoDecoder::kTaehvDraft;
  const fs::path latents_path = !request.save_latents.empty() ? request.save_latents
                                : draft && request.latents.empty()
                                    ? draft_latents_path(request.output)
                                    : fs::path();
  if (!request.save_noise.empty()) check_replay_output(request.save_noise, "--save-noise");
  if (!request.save_latents.empty()) check_replay_output(request.save_latents, "--save-latents");
  if (request.save_text_states && request.save_latents.empty()) {
    throw Error(ErrorCode::kBadArgument, "--save-text-states needs --save-latents FILE");
  }
  ReplayFile noise_out, latents_out;
  result.peak_device_bytes = plan.predicted_vram_peak;
  // A draft's clip names its kept latents: the full decode looks for them beside it.
  const nlohmann::json settings =
      settings_json(r, parts, preset, draft ? latents_path : fs::path());

  // Telemetry: a line per step and per stage to the stats file, steps to the sink.
  std::ofstream jsonl;
  if (!request.stats_jsonl.empty()) {
    jsonl.open(request.stats_jsonl, std::ios::binary | std::ios::trunc);
    if (!jsonl) {
      throw Error(ErrorCode::kIo,
                  "cannot write the stats file " + io::detail::display(request.stats_jsonl));
    }
  }
  double step_seconds = 0;
  offload::Telemetry telemetry(
      options.device_memory,
      [&](const offload::StepStats& s) {
        step_seconds += s.seconds;
        StepProgress p;
        p.step = s.step;
        p.steps = r.steps;
        p.seconds_per_step = step_seconds / s.step;
        p.eta_seconds = p.seconds_per_step * (r.steps - s.step);
        p.stats = s;
        result.steps.push_back(s);
        sink.step(p);
      },
      jsonl.is_open() ? &jsonl : nullptr);

  FrameWriter video(r, settings, options, cancel);
  models::RunContext context{
      backend,
      preset,
      machine,
      cancel,
      telemetry,
      options.streamer,
      options.stream_all,
      [&](const media::RgbImage& preview) { sink.preview(preview); },
      [&](std::int64_t n, std::span<const float> pixels) { video.write(n, pixels); },
      {},
      {},
      {},
      {},
      {},
      {},
      [&](media::AudioTrack track) { video.set_soundtrack(std::move(track)); }};
  if (sink.wants_preview_frames()) {
    context.preview_frames = [&](const std::vector<media::RgbImage>& frames) {
      sink.preview_frames(frames);
    };
  }
  if (!noise_from_file.empty()) {
    context.initial_noise = [&](std::string_view name, std::span<float> out) {
      for (std::size_t i = 0; i < noise_layout.size(); ++i) {
        if (noise_layout[i].name == name) {
          std::copy(noise_from_file[i].begin(), noise_from_file[i].end(), out.begin());
        }
      }
    };
  } else if (options.initial_noise) {
    context.initial_noise = [&](std::string_view, std::span<float> out) {
      options.initial_noise(out);
    };
  }
  if (!request.save_noise.empty()) {
    context.noise_used = [&](std::string_view name, std::span<const float> values) {
      noise_out.add(name, values, noise_layout);
    };
  }
  if (!latents_path.empty() || options.final_latent) {
    context.final_latent = [&](std::string_view name, std::span<const float> values) {
      if (options.final_latent) options.final_latent(values);
      if (!latents_path.empty()) latents_out.add(name, values, latent_layout);
    };
  }
  if (!latents_from_file.empty()) {
    context.saved_latent = [&](std::string_view name, std::span<float> out) {
      for (std::size_t i = 0; i < latent_layout.size(); ++i) {
        if (latent_layout[i].name == name) {
          std::copy(latents_from_file[i].begin(), latents_from_file[i].end(), out.begin());
        }
      }
    };
  }
  if (request.save_text_states) {
    context.text_state = [&](const models::TensorBytes& t) {
      latents_out.add(t.name, t.dtype, t.shape, t.bytes);
    };
  }

  for (const std::string& note : options.notes) sink.note(note);
  for (const std::string& warning : r.warnings) sink.warning(warning);
  const std::unique_ptr<models::FamilyRun> run = parts.start(r, plan, std::move(images));
  for (const Stage stage : run->stages()) {
    sink.stage(stage);
    telemetry.begin_stage(std::string(models::stage_key(stage)));
    run->run_stage(stage, context);
    cancel.throw_if_cancelled();
    if (video.pending()) {  // the stage that decoded the video also writes it
      sink.stage(Stage::kWrite);
      result.encoder = video.finish();
    }
    result.stages.push_back(telemetry.end_stage());
  }
  if (result.encoder.empty()) throw Error(ErrorCode::kInternal, "the model decoded no video");

  // The replay files, now that the run has succeeded (each through a temporary name).
  const std::map<std::string, std::string> replay_metadata = {
      {"ferry_version", FERRY_VERSION},
      {"model", parts.name()},
      {"seed", std::to_string(request.seed)}};
  if (!request.save_noise.empty()) noise_out.write(request.save_noise, replay_metadata);
  if (!latents_path.empty()) {
    latents_out.write(latents_path, replay_metadata);
    result.latents = latents_path;
  }

  result.video = request.output;
  result.soundtrack_wav = request.soundtrack_wav;
  result.sidecar = fs::path(request.output).replace_extension(".json");
  const std::string sidecar = settings.dump(2) + "\n";
  io::write_file_atomically(result.sidecar, std::as_bytes(std::span(sidecar)));
  return result;
}

}  // namespace ferry::pipeline
