// The MiniMax-H3 family (FL2VA: text, first- and/or last-frame to video with sound) behind the
// interface of core/models/family.h: its model sets (model_set.h), its request rules, and the plan
// of every stage. The conditioner (the Qwen3-VL text encoder with its vision tower for keyframes)
// the DiT, the keyframe encode and the video decode are planned from their weights and arenas;
// the plan lists the audio decode with its weights and says it is not planned yet, and a run is
// refused before any work with Error(kUnsupported) naming them.
#include "core/models/family.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/model_set.h"
#include "core/models/h3/presentation.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/models/h3/video_vae_plan.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/models/h3/vision_tower_weights.h"

namespace ferry::models::h3 {
namespace {

// The stage names of H3's GenerationPlan, in order.
constexpr std::string_view kVisionStage = "vision tower";
constexpr std::string_view kTextStage = "text encoder";
constexpr std::string_view kKeyframeStage = "keyframe encode";
constexpr std::string_view kDitStage = "diffusion model";
constexpr std::string_view kVideoDecodeStage = "video decode";
constexpr std::string_view kAudioDecodeStage = "audio decode";

// The text tokens the conditioner is planned for besides the keyframes' (H3 does not truncate; a
// prompt longer than this is planned again when it is tokenized).
constexpr std::int64_t kPlanTextTokens = 512;

// Defaults (minimax_h3.md §H.1, diffusers): 768x1344, 124 frames (5.2 s) at 24 fps, 50 steps, no
// CFG, shifts 12 (video) and 3 (audio).
constexpr int kDefaultWidth = 1344, kDefaultHeight = 768, kDefaultFrames = 124, kFps = 24;
constexpr int kDefaultSteps = 50;
constexpr double kDefaultShift = 12;
constexpr int kMaxFrames = 17 * 20 + 5;  // 14.4 s, the longest the release shows

[[noreturn]] void bad_argument(const std::string& message) {
  throw Error(ErrorCode::kBadArgument, message);
}

// What a run would need that is not built yet, said before any work.
Error not_built() {
  return Error(ErrorCode::kUnsupported,
               "MiniMax-H3 generation is not built yet: Ferry has its conditioner (text encoder "
               "and keyframes), its diffusion model's forward and its video VAE, but not yet its "
               "audio decoder, nor the stages joined into a run; `ferry-cli plan` shows every "
               "stage");
}

// Frames of the form 17n+5, snapped up (§C.2, §E.5).
int snap_frames(int frames) {
  if (frames <= 5) return 5;
  return (frames - 5 + 16) / 17 * 17 + 5;
}

// Audio latents per channel for `frames` video frames at 24 fps: 40 a second, rounded (§F.1:
// 124 frames -> 207).
std::int64_t audio_latents(int frames) {
  return std::lround(frames / 24.0 * 40.0);
}

// diffusers' resolve_canvas_size (§H.1) for a first keyframe of w x h: short edge 768, area at
// most 768x1344, sides multiples of 32.
std::pair<int, int> canvas_for(int w, int h) {
  const double r = std::clamp(static_cast<double>(w) / h, 0.25, 4.0);
  double W = r >= 1 ? 768 * r : 768, H = r >= 1 ? 768 : 768 / r;
  const double cap = 768.0 * 1344.0;
  if (W * H > cap) {
    const double s = std::sqrt(cap / (W * H));
    W *= s, H *= s;
  }
  const auto side = [](double v) {
    return std::max(32, static_cast<int>(std::lround(v / 32)) * 32);
  };
  return {side(W), side(H)};
}

StagePlan not_implemented(std::string_view stage, std::string layout, std::uint64_t weight_bytes,
                          std::string what) {
  StagePlan s;
  s.stage = std::string(stage);
  s.layout = std::move(layout);
  s.weight_bytes = weight_bytes;
  s.detail = "not yet implemented (" + what + "): not planned, not counted in the peaks";
  s.implemented = false;
  return s;
}

class H3Parts final : public ModelParts {
 public:
  explicit H3Parts(const std::vector<std::filesystem::path>& paths)
      : set_(find_model_set(paths, &opened_)) {}

  std::string_view family() const override { return "h3"; }
  std::string name() const override { return set_.name(); }
  bool is_demo() const override { return false; }
  std::vector<std::string> describe() const override { return h3::describe(set_); }

  std::vector<PartFile> files() const override {
    std::vector<PartFile> files;
    const auto add = [&](const char* role, const io::TensorSet& set) {
      for (const io::TensorFile& f : set.files()) files.push_back({role, f.path(), f.file_size()});
    };
    add("diffusion model", opened_.dit);
    add("text encoder", opened_.text_encoder);
    add("video VAE", opened_.video_vae);
    if (opened_.audio_vae.files().empty()) {  // recognised from its header alone
      std::error_code ec;
      files.push_back(
          {"audio VAE", set_.audio_vae, std::filesystem::file_size(set_.audio_vae, ec)});
    } else {
      add("audio VAE", opened_.audio_vae);
    }
    return files;
  }

  RequestRules rules() const override {
    RequestRules r;
    r.size_multiple = 32;
    r.min_size = 256;
    r.max_size = 2048;
    r.frames_step = 1;  // any count is snapped up to 17n+5 by resolve()
    r.max_frames = kMaxFrames;
    r.max_guide_scale = 20;
    r.takes_start_image = set_.text.vision;
    r.takes_end_image = set_.text.vision;
    r.samplers = {"euler"};
    r.width = kDefaultWidth;
    r.height = kDefaultHeight;
    r.frames = kDefaultFrames;
    r.fps = kFps;
    r.steps = kDefaultSteps;
    r.guide_scale = 1;
    r.low_noise_guide_scale = 1;
    r.shift = kDefaultShift;
    r.sampler = "euler";
    r.sizes = {{1344, 768}, {768, 1344}, {832, 480}, {480, 832}, {1024, 1024}};
    return r;
  }

  ResolvedRequest resolve(const GenerationRequest& request,
                          std::optional<std::pair<int, int>> image_size) const override {
    const RequestRules rules = this->rules();
    if ((request.image || request.end_image) && !set_.text.vision) {
      bad_argument("keyframes need the vision tower, which the text encoder " +
                   io::detail::display(set_.text_encoder) +
                   " does not hold: use DiffSynth's minimax-h3-text-encoder-nf4 or the release's "
                   "text_encoder/");
    }
    if (!request.loras.empty()) {
      bad_argument("LoRAs for MiniMax-H3 are not supported yet");
    }
    ResolvedRequest r;
    r.request = request;
    r.width = kDefaultWidth;
    r.height = kDefaultHeight;
    if (image_size) std::tie(r.width, r.height) = canvas_for(image_size->first, image_size->second);
    if (request.width != 0 || request.height != 0) {
      if (request.width <= 0 || request.height <= 0) bad_argument("give both --width and --height");
      r.width = request.width;
      r.height = request.height;
    }
    r.frames = snap_frames(request.frames != 0 ? request.frames : kDefaultFrames);
    r.fps = request.fps != 0 ? request.fps : kFps;
    r.steps = request.steps != 0 ? request.steps : kDefaultSteps;
    r.guide_scale = request.guide_scale.value_or(1.0f);
    r.low_noise_guide_scale = r.guide_scale;
    r.shift = request.shift.value_or(kDefaultShift);
    r.sampler = request.sampler.value_or(rules.sampler);
    check_request(r, rules, set_.name());
    r.latent_frames = (r.frames - 5) / 17 * 5 + 2;  // T' = 5n + 2
    r.latent_height = r.height / 16;
    r.latent_width = r.width / 16;
    return r;
  }

  LoraReport check_lora(const std::filesystem::path&) const override {
    throw Error(ErrorCode::kUnsupported, "LoRAs for MiniMax-H3 are not supported yet");
  }

  // The DiT's noise is part of what is not built: a run stops here, before the pipeline writes
  // anything (the stats file included).
  std::vector<TensorLayout> noise_layout(const ResolvedRequest&) const override {
    throw not_built();
  }
  std::vector<TensorLayout> latent_layout(const ResolvedRequest&) const override {
    throw not_built();
  }

  GenerationPlan plan(const ResolvedRequest& r, const offload::Preset& preset,
                      const offload::MachineInfo& machine, bool stream_all) const override {
    GenerationPlan g;
    g.preset = preset.name;
    const int keyframes = (r.request.image ? 1 : 0) + (r.request.end_image ? 1 : 0);
    const auto vision_tokens = static_cast<std::int64_t>(
        vision_token_count(static_cast<std::size_t>(r.height), static_cast<std::size_t>(r.width)));
    // The conditioner: the tower first (keyframes only), then the language model; each frees
    // what it held before the next plans (conditioner.h).
    if (keyframes > 0) {
      const VisionTowerWeights tower = VisionTowerWeights::from(opened_.text_encoder);
      const std::int64_t patches = keyframes * vision_tokens * tower.config().merge_unit();
      StagePlan s = block_stage_plan(std::string(kVisionStage), tower.model_layout(patches), preset,
                                     machine, stream_all);
      s.detail = std::to_string(keyframes) + " keyframe" + (keyframes > 1 ? "s" : "") + ", " +
                 std::to_string(patches) + " patches";
      g.add(std::move(s));
    }
    const TextEncoderWeights text = TextEncoderWeights::from(opened_.text_encoder);
    const std::int64_t tokens = kPlanTextTokens + keyframes * vision_tokens;
    StagePlan t = block_stage_plan(std::string(kTextStage), text.model_layout(tokens), preset,
                                   machine, stream_all);
    t.detail = std::to_string(tokens) + " tokens (" + std::to_string(kPlanTextTokens) + " of text" +
               (keyframes > 0 ? " + " + std::to_string(keyframes * vision_tokens) + " of keyframes"
                              : std::string()) +
               ")";
    g.add(std::move(t));
    if (keyframes > 0) {
      const vae::VideoVaeWeights weights = vae::VideoVaeWeights::from(opened_.video_vae);
      StagePlan k =
          vae::keyframe_encode_stage_plan(weights, r.width, r.height, keyframes, preset, machine);
      k.stage = std::string(kKeyframeStage);
      k.detail += "; the stage is not wired into a run yet";
      g.add(std::move(k));
    }
    g.add(dit_stage_plan(r, keyframes, tokens, preset, machine, stream_all));
    g.add(video_decode_stage_plan(r, preset, machine, stream_all));
    g.add(not_implemented(kAudioDecodeStage, "H3 audio VAE (BigVGAN decoder)", set_.audio_vae_bytes,
                          "the audio VAE's decoder"));
    return g;
  }

  // The DiT's stage, planned from its weights' groups and the exact arena of its forward
  // (DitWeights::activation_bytes) over the packed sequence of this request: the conditioner's
  // `text_rows`, each keyframe's and each target latent frame's 2x2 patches, and both audio
  // channels' latents (§C.2, §F.1). Its code runs on tiny models (tests/models/h3_dit_test.cpp);
  // the stage itself is not wired into a run yet, which start() says.
  StagePlan dit_stage_plan(const ResolvedRequest& r, int keyframes, std::int64_t text_rows,
                           const offload::Preset& preset, const offload::MachineInfo& machine,
                           bool stream_all) const {
    const dit::DitWeights weights = dit::DitWeights::from(opened_.dit);
    dit::PackedGeometry geometry;
    geometry.latent_frames = r.latent_frames;
    geometry.latent_height = r.latent_height;
    geometry.latent_width = r.latent_width;
    const std::int64_t frame_rows = geometry.rows_per_frame();
    const std::int64_t audio_rows = dit::kAudioChannels * audio_latents(r.frames);
    const std::int64_t rows = text_rows + (keyframes + r.latent_frames) * frame_rows + audio_rows;
    const DitInfo& d = set_.dit_info;
    StagePlan s = block_stage_plan(std::string(kDitStage),
                                   weights.model_layout(rows, text_rows, preset.chunk_tokens),
                                   preset, machine, stream_all);
    s.detail = std::to_string(rows) + " rows (" + std::to_string(text_rows) + " text, " +
               std::to_string(keyframes * frame_rows) + " keyframe, " + std::to_string(audio_rows) +
               " audio, " + std::to_string(r.latent_frames * frame_rows) + " video)" +
               (d.pruned ? ", pruned AdaLN" : "") + "; the stage is not wired into a run yet";
    return s;
  }

  // The video decode's stage, planned from the decoder's groups and the arena of one tile-chunk
  // (vae::video_decode_stage_plan). Its code runs on tiny models (tests/models/
  // h3_video_vae_test.cpp); the stage is not wired into a run yet.
  StagePlan video_decode_stage_plan(const ResolvedRequest& r, const offload::Preset& preset,
                                    const offload::MachineInfo& machine, bool stream_all) const {
    const vae::VideoVaeWeights weights = vae::VideoVaeWeights::from(opened_.video_vae);
    StagePlan s = vae::video_decode_stage_plan(weights, r.width, r.height, r.frames, preset,
                                               machine, stream_all);
    s.stage = std::string(kVideoDecodeStage);
    s.detail += "; the stage is not wired into a run yet";
    return s;
  }

  std::unique_ptr<FamilyRun> start(const ResolvedRequest&, const GenerationPlan&,
                                   FrameImages) const override {
    throw not_built();
  }

 private:
  OpenedParts opened_;  // before set_: find_model_set fills it
  ModelSet set_;
};

class H3Family final : public ModelFamily {
 public:
  std::string_view name() const override { return "h3"; }
  std::unique_ptr<ModelParts> open(const std::vector<std::filesystem::path>& paths) const override {
    return std::make_unique<H3Parts>(paths);
  }
  std::optional<PartSketch> sketch_part(const io::TensorSet& set) const override {
    return h3::sketch_part(set);
  }
  std::optional<PartSketch> sketch_unopenable_part(
      const std::filesystem::path& path) const override {
    return h3::sketch_unopenable_part(path);
  }
  std::optional<std::filesystem::path> write_demo_model(
      const std::filesystem::path&) const override {
    return std::nullopt;  // the H3 demo comes with the DiT and the VAEs (issue 21)
  }
};

}  // namespace

const ModelFamily& family() {
  static const H3Family instance;
  return instance;
}

}  // namespace ferry::models::h3
