// The MiniMax-H3 family (FL2VA: text, first- and/or last-frame to video with sound) behind the
// interface of core/models/family.h: its model sets (model_set.h), its request rules, the plan of
// every stage (the conditioner — the Qwen3-VL text encoder with its vision tower for keyframes —
// the keyframe encode, the DiT, the video decode and the audio decode, each from its weights and
// arenas), its run (run.h) and its demo model (demo_model.h).
#include "core/models/family.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/models/h3/audio_vae.h"
#include "core/models/h3/audio_vae_weights.h"
#include "core/models/h3/bpe_tokenizer.h"
#include "core/models/h3/demo_model.h"
#include "core/models/h3/dit_loras.h"
#include "core/models/h3/dit_sequence.h"
#include "core/models/h3/dit_weights.h"
#include "core/models/h3/model_set.h"
#include "core/models/h3/presentation.h"
#include "core/models/h3/run.h"
#include "core/models/h3/text_encoder_weights.h"
#include "core/models/h3/video_vae_plan.h"
#include "core/models/h3/video_vae_weights.h"
#include "core/models/h3/vision_tower_weights.h"
#include "core/models/lora/distill_name.h"
#include "core/offload/budget.h"
#include "core/offload/planner.h"

namespace ferry::models::h3 {
namespace {

// The text tokens the conditioner is planned for besides the keyframes' at least (H3 does not
// truncate: a longer prompt is planned for its own length, H3Parts::conditioner_tokens), so that
// editing a prompt in the app does not change the plan.
constexpr std::int64_t kPlanTextTokens = 512;

// Defaults (minimax_h3.md §H.1, diffusers): 768x1344, 124 frames (5.2 s) at 24 fps, 49 steps, no
// CFG, shifts 12 (video) and 3 (audio).
constexpr int kDefaultWidth = 1344, kDefaultHeight = 768, kDefaultFrames = 124, kFps = 24;
// Steps count the DiT's forwards (as DiffSynth and ComfyUI count them, and the Turbo LoRAs' "4
// steps"); diffusers' num_inference_steps counts the schedule's grid points, one more. Its default
// of 50 grid points is 49 forwards.
constexpr int kDefaultSteps = 49;
constexpr double kDefaultShift = 12;
// The Turbo recipe (minimax_h3.md §D.3: lightx2v's minimax_h3_fl2v_turbo_4step LoRA): 4 forwards
// (DiffSynth's 4 steps, diffusers' 5 grid points), video shift 6, the audio's 3 as always, no CFG.
// The same Euler update as the model's own sampler: only the defaults differ.
constexpr std::string_view kTurboSampler = "distill4";
constexpr int kTurboSteps = 4;
constexpr double kTurboShift = 6;
constexpr int kMaxFrames = 17 * 20 + 5;  // 14.4 s, the longest the release shows
// The demo set's defaults (demo_model.h): the vision tower's smallest keyframe, 1 s, 8 steps.
constexpr int kDemoSide = 256, kDemoFrames = 22, kDemoSteps = 8;

// The structured prompt H3 was trained on (summary, shots, dialogue in H3's <d>[Language] …</d>
// markup, the soundscape), with placeholders to replace; offered by the app, never required.
constexpr std::string_view kPromptTemplate = R"(summary:
<One sentence: who, where, and what happens.>

detailed_description:
The video is in realistic photographic style.
[Shot 1] <The place, the light and the camera.> <The person>, <what they look like>, <what they do>. <The person> (S1) says, <d>[English] The line, word for word.</d> <What happens after the line, until the end of the video.>

overall_soundscape:
<The ambience and sound effects heard throughout.>

non_diegetic_music:
<The score, or: none.>
)";

// The weights' own licence (not Ferry's), which the app asks the user to confirm once.
WeightsLicence weights_licence() {
  WeightsLicence l;
  l.key = "h3";
  l.model = "MiniMax-H3";
  l.name = "MiniMax H3 Community License";
  l.url = "https://huggingface.co/MiniMaxAI/MiniMax-H3/blob/main/LICENSE";
  l.restrictions =
      "its own territory restrictions (where the weights may be used) and use restrictions (what "
      "they may be used for)";
  return l;
}

[[noreturn]] void bad_argument(const std::string& message) {
  throw Error(ErrorCode::kBadArgument, message);
}

// Frames of the form 17n+5, snapped up (§C.2, §E.5).
// The shortest is 22 (n = 1: one decode chunk of 7 latents; the decoder has no n = 0).
int snap_frames(int frames) {
  if (frames <= 22) return 22;
  return (frames - 5 + 16) / 17 * 17 + 5;
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

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// A Turbo (step-distillation) LoRA, told by its file name (lora/distill_name.h), run any other
// way than its recipe: a warning with the advice, as Wan gives it. H3 has no CFG to warn about.
std::vector<std::string> turbo_warnings(const ResolvedRequest& r) {
  std::vector<std::string> out;
  const bool turbo = r.sampler == kTurboSampler;
  for (const LoraChoice& lora : r.request.loras) {
    const int steps = lora::distilled_steps(lora.path);
    if (steps == 0 || (turbo && r.steps <= 8)) continue;
    out.push_back(io::detail::display(lora.path.filename()) + " is a Turbo (step-distillation) " +
                  "LoRA (" + std::to_string(steps) + " steps) but this run asks for the " +
                  r.sampler + " sampler, " + std::to_string(r.steps) + " steps, shift " +
                  number_text(r.shift) + ": choose the " + std::string(kTurboSampler) +
                  " sampler with " + std::to_string(steps) + " steps and shift " +
                  number_text(kTurboShift) + ", or expect a slow run and a burnt image");
  }
  return out;
}

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB";
}

class H3Parts final : public ModelParts {
 public:
  explicit H3Parts(const std::vector<std::filesystem::path>& paths)
      : set_(find_model_set(paths, &opened_)) {}

  std::string_view family() const override { return "h3"; }
  std::string name() const override { return set_.name(); }
  bool is_demo() const override { return is_h3_demo_folder(set_.dit.parent_path()); }
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
    r.frames_step = 17;  // 17n+5 with n ≥ 1 (resolve() snaps any other count up to it)
    r.frames_offset = 22;
    r.max_frames = kMaxFrames;
    r.max_guide_scale = 20;
    r.takes_start_image = set_.text.vision;
    r.takes_end_image = set_.text.vision;
    r.end_image_alone = set_.text.vision;  // I2VA from the last frame
    r.makes_sound = true;                  // the audio VAE's 32 kHz stereo soundtrack
    r.samplers = {"euler", std::string(kTurboSampler)};
    r.sampler_defaults.push_back({std::string(kTurboSampler), kTurboSteps, 1.0f, kTurboShift});
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
    r.mode_names = {"T2VA", "I2VA (first frame)", "I2VA (last frame)", "FL2VA"};
    r.prompt_template = std::string(kPromptTemplate);
    r.prompt_template_help =
        "MiniMax-H3 was trained on structured prompts (summary, shots, dialogue in <d>[English] "
        "…</d>, the soundscape).";
    r.weights_licence = weights_licence();
    if (is_demo()) {
      // The tiny demo set's own small defaults: seconds on a CPU, the whole path included.
      r.width = r.height = kDemoSide;
      r.frames = kDemoFrames;
      r.steps = kDemoSteps;
      r.sizes = {{kDemoSide, kDemoSide}};
    }
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
    ResolvedRequest r;
    r.request = request;
    r.width = rules.width;
    r.height = rules.height;
    if (image_size && !is_demo())
      std::tie(r.width, r.height) = canvas_for(image_size->first, image_size->second);
    if (request.width != 0 || request.height != 0) {
      if (request.width <= 0 || request.height <= 0) bad_argument("give both --width and --height");
      r.width = request.width;
      r.height = request.height;
    }
    r.frames = snap_frames(request.frames != 0 ? request.frames : rules.frames);
    r.fps = request.fps != 0 ? request.fps : kFps;
    r.sampler = request.sampler.value_or(rules.sampler);
    const bool turbo = r.sampler == kTurboSampler;
    r.steps = request.steps != 0 ? request.steps : (turbo ? kTurboSteps : rules.steps);
    r.guide_scale = request.guide_scale.value_or(1.0f);
    r.low_noise_guide_scale = r.guide_scale;
    r.shift = request.shift.value_or(turbo ? kTurboShift : kDefaultShift);
    check_request(r, rules, set_.name());
    // Every LoRA is checked before any work (a refusal is exit 2); modules that adapt nothing in
    // this model are said once per file, never silently dropped.
    for (const LoraChoice& l : request.loras) {
      const LoraReport report = check_lora(l.path);
      if (report.matched < report.modules) r.warnings.push_back("LoRA " + lora::describe(report));
    }
    for (std::string& w : turbo_warnings(r)) r.warnings.push_back(std::move(w));
    r.latent_frames = (r.frames - 5) / 17 * 5 + 2;  // T' = 5n + 2
    r.latent_height = r.height / 16;
    r.latent_width = r.width / 16;
    return r;
  }

  LoraReport check_lora(const std::filesystem::path& path) const override {
    return check_dit_lora(path, dit::DitWeights::from(opened_.dit));
  }

  // The pipeline asks for the noise before it writes anything: a set that cannot run stops here.
  std::vector<TensorLayout> noise_layout(const ResolvedRequest& r) const override {
    refuse_header_only();
    const dit::DitConfig c = dit::DitWeights::from(opened_.dit).config();
    return h3_noise_layout(r, c.patch_dim / 4, c.audio_channels);
  }
  std::vector<TensorLayout> latent_layout(const ResolvedRequest& r) const override {
    const dit::DitConfig c = dit::DitWeights::from(opened_.dit).config();
    return h3_latent_layout(r, c.patch_dim / 4, c.audio_channels);
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
    const std::int64_t tokens = conditioner_tokens(r, keyframes, vision_tokens);
    const std::int64_t text_tokens = tokens - keyframes * vision_tokens;
    StagePlan t = block_stage_plan(std::string(kTextStage), text.model_layout(tokens), preset,
                                   machine, stream_all);
    t.detail = std::to_string(tokens) + " tokens (" + std::to_string(text_tokens) + " of text" +
               (keyframes > 0 ? " + " + std::to_string(keyframes * vision_tokens) + " of keyframes"
                              : std::string()) +
               ")";
    g.add(std::move(t));
    if (keyframes > 0) {
      const vae::VideoVaeWeights weights = vae::VideoVaeWeights::from(opened_.video_vae);
      StagePlan k =
          vae::keyframe_encode_stage_plan(weights, r.width, r.height, keyframes, preset, machine);
      k.stage = std::string(kKeyframeStage);
      g.add(std::move(k));
    }
    g.add(dit_stage_plan(r, keyframes, tokens, preset, machine, stream_all));
    g.add(video_decode_stage_plan(r, preset, machine, stream_all));
    g.add(audio_decode_stage_plan(r, preset, machine));
    return g;
  }

  // The DiT's stage, planned from its weights' groups and the exact arena of its forward
  // (DitWeights::activation_bytes) over the packed sequence of this request: the conditioner's
  // `text_rows`, each keyframe's and each target latent frame's 2x2 patches, and both audio
  // channels' latents (§C.2, §F.1). Its code runs on tiny models (tests/models/h3_dit_test.cpp);
  // the run streams it under this plan (run.cpp).
  StagePlan dit_stage_plan(const ResolvedRequest& r, int keyframes, std::int64_t text_rows,
                           const offload::Preset& preset, const offload::MachineInfo& machine,
                           bool stream_all) const {
    const dit::DitWeights weights = dit::DitWeights::from(opened_.dit);
    dit::PackedGeometry geometry;
    geometry.latent_frames = r.latent_frames;
    geometry.latent_height = r.latent_height;
    geometry.latent_width = r.latent_width;
    const std::int64_t frame_rows = geometry.rows_per_frame();
    const std::int64_t audio_rows = dit::kAudioChannels * audio_latents_for(r.frames);
    const std::int64_t rows = text_rows + (keyframes + r.latent_frames) * frame_rows + audio_rows;
    const DitInfo& d = set_.dit_info;
    // The LoRAs' tensors join their blocks' groups: the plan counts them like the DiT's own.
    offload::ModelLayout layout = weights.model_layout(rows, text_rows, preset.chunk_tokens);
    const lora::LoraBinding loras =
        bind_dit_loras(r.request.loras, weights, layout, rows, text_rows, preset.chunk_tokens, 4);
    StagePlan s = block_stage_plan(std::string(kDitStage), layout, preset, machine, stream_all);
    s.detail = std::to_string(rows) + " rows (" + std::to_string(text_rows) + " text, " +
               std::to_string(keyframes * frame_rows) + " keyframe, " + std::to_string(audio_rows) +
               " audio, " + std::to_string(r.latent_frames * frame_rows) + " video)" +
               (d.pruned ? ", pruned AdaLN" : "");
    for (const LoraReport& report : loras.reports()) s.detail += ", LoRA " + lora::describe(report);
    return s;
  }

  // The video decode's stage, planned from the decoder's groups and the arena of one tile-chunk
  // (vae::video_decode_stage_plan). Its code runs on tiny models (tests/models/
  // h3_video_vae_test.cpp).
  StagePlan video_decode_stage_plan(const ResolvedRequest& r, const offload::Preset& preset,
                                    const offload::MachineInfo& machine, bool stream_all) const {
    const vae::VideoVaeWeights weights = vae::VideoVaeWeights::from(opened_.video_vae);
    StagePlan s = vae::video_decode_stage_plan(weights, r.width, r.height, r.frames, preset,
                                               machine, stream_all);
    s.stage = std::string(kVideoDecodeStage);
    return s;
  }

  // The audio decode: the decoder's weights resident (about 65 M parameters, f32 once loaded)
  // and its arena for both channels' latents (AudioVaeDecoder::soundtrack_arena_bytes); the host
  // holds the soundtrack until the video opens with it.
  StagePlan audio_decode_stage_plan(const ResolvedRequest& r, const offload::Preset& preset,
                                    const offload::MachineInfo& machine) const {
    std::optional<io::TensorSet> own;
    const io::TensorSet* set = &opened_.audio_vae;
    if (set->files().empty()) set = &own.emplace(io::TensorSet::open(set_.audio_vae));
    const AudioVaeWeights weights = AudioVaeWeights::shapes_only(*set);
    const std::int64_t latents = audio_latents_for(r.frames);
    StagePlan s;
    s.stage = std::string(kAudioDecodeStage);
    s.layout = "MiniMax-H3 audio VAE decoder (" + std::to_string(weights.stages().size()) +
               " upsampling stages)";
    s.weight_bytes = weights.bytes();
    s.activation_bytes =
        AudioVaeDecoder::soundtrack_arena_bytes(weights, dit::kAudioChannels, latents);
    const offload::Budget budget = offload::budget_for(preset, machine);
    const std::uint64_t device = s.weight_bytes + s.activation_bytes;
    const std::uint64_t track = static_cast<std::uint64_t>(dit::kAudioChannels * latents) *
                                static_cast<std::uint64_t>(weights.config().hop()) * sizeof(float);
    s.predicted_vram_peak = budget.device_is_host ? 0 : device;
    s.predicted_ram_peak =
        offload::kProcessBaseBytes + 2 * track + (budget.device_is_host ? device : 0);
    const bool vram = !budget.device_is_host && device > budget.device_bytes;
    if (vram || s.predicted_ram_peak > budget.ram_bytes) {
      throw Error(ErrorCode::kDoesNotFit,
                  "decoding the soundtrack needs " + mib(vram ? device : s.predicted_ram_peak) +
                      " of " + (vram ? "VRAM" : "RAM") + ", but preset '" + preset.name + "' has " +
                      mib(vram ? budget.device_bytes : budget.ram_bytes) + " here");
    }
    s.detail = std::to_string(latents) + " latents a channel, 2 channels, " +
               std::to_string(latents * weights.config().hop()) + " samples each at " +
               std::to_string(weights.config().sample_rate) + " Hz";
    return s;
  }

  std::unique_ptr<FamilyRun> start(const ResolvedRequest& request, const GenerationPlan& plan,
                                   FrameImages images) const override {
    refuse_header_only();
    return start_run(set_, opened_, tokenizer_for_run(request), request, plan, std::move(images));
  }

 private:
  // Error(kUnsupported) for a header-only synthetic file (ferry-cli synth --set h3-nf4): its
  // tensors are holes, for plans and inspect, and a run of it would compute on zeros.
  void refuse_header_only() const {
    for (const io::TensorSet* set :
         {&opened_.dit, &opened_.text_encoder, &opened_.video_vae, &opened_.audio_vae}) {
      for (const io::TensorFile& f : set->files()) {
        const auto it = f.metadata().find("ferry.synthetic");
        if (it != f.metadata().end() && it->second.starts_with("header only")) {
          throw Error(ErrorCode::kUnsupported,
                      io::detail::display(f.path().filename()) +
                          " is a header-only synthetic file (ferry-cli synth --set): its tensors "
                          "are holes, for plans and inspect; a run needs the real weights");
        }
      }
    }
  }

  // The conditioner's sequence for this request: its prompt's presentation with each keyframe's
  // vision tokens, and at least kPlanTextTokens of text. A set whose tokenizer cannot be read
  // (a header-only synthetic set has none) is planned for kPlanTextTokens; its run says why.
  std::int64_t conditioner_tokens(const ResolvedRequest& r, int keyframes,
                                  std::int64_t vision_tokens) const {
    const std::int64_t least = kPlanTextTokens + keyframes * vision_tokens;
    const std::shared_ptr<const BpeTokenizer> tokenizer = cached_tokenizer();
    if (!tokenizer) return least;
    const std::vector<std::size_t> per_keyframe(static_cast<std::size_t>(keyframes),
                                                static_cast<std::size_t>(vision_tokens));
    const Presentation p = keyframes == 0
                               ? present_text(*tokenizer, r.request.prompt)
                               : present_with_keyframes(*tokenizer, r.request.prompt, per_keyframe);
    return std::max(least, static_cast<std::int64_t>(p.length()));
  }

  // The set's tokenizer, read once for the plans (made each time a setting changes in the app)
  // and the runs; null when it cannot be read (tokenizer_error_ says why).
  std::shared_ptr<const BpeTokenizer> cached_tokenizer() const {
    const std::lock_guard lock(tokenizer_mutex_);
    if (!tokenizer_ && !tokenizer_error_) {
      try {
        tokenizer_ =
            std::make_shared<const BpeTokenizer>(BpeTokenizer::from_folder(set_.tokenizer));
      } catch (const Error& e) {
        tokenizer_error_ = e;
      }
    }
    return tokenizer_;
  }

  // The cached tokenizer for a run that encodes a prompt, or the error that kept it from being
  // read, before any work; none for a run that decodes saved latents.
  std::shared_ptr<const BpeTokenizer> tokenizer_for_run(const ResolvedRequest& request) const {
    if (!request.request.latents.empty()) return nullptr;
    std::shared_ptr<const BpeTokenizer> tokenizer = cached_tokenizer();
    if (!tokenizer) throw *tokenizer_error_;
    return tokenizer;
  }

  OpenedParts opened_;  // before set_: find_model_set fills it
  ModelSet set_;
  mutable std::mutex tokenizer_mutex_;
  mutable std::shared_ptr<const BpeTokenizer> tokenizer_;
  mutable std::optional<Error> tokenizer_error_;
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
      const std::filesystem::path& folder) const override {
    write_h3_demo_model(folder);
    return folder;
  }
};

}  // namespace

const ModelFamily& family() {
  static const H3Family instance;
  return instance;
}

}  // namespace ferry::models::h3
