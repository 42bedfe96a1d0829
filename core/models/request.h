// What a user asks for — prompt, optional start image, size, frames, sampling settings, preset,
// output — whatever the model family, and the same request with every default filled in and
// checked by the family (core/models/family.h) before any weight is read. The rules a family
// applies are also published (RequestRules), so the app's inputs offer only what the engine
// accepts.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ferry::models {

// A LoRA applied at runtime (formats_lora_moe.md §4): y = W·x + strength·(alpha/rank)·B·(A·x) on
// every layer it adapts, never merged into the model's weights.
struct LoraChoice {
  std::filesystem::path path;  // a safetensors file
  float strength = 1.0f;
  bool operator==(const LoraChoice&) const = default;
};

// What makes the video from the final latent: the model's VAE, or the TAEHV preview decoder for a
// draft (formats_lora_moe.md §7: full size and frame count, softer detail, seconds instead of
// minutes), whose latents are kept so the VAE can decode them later without denoising again.
enum class VideoDecoder { kVae, kTaehvDraft };

struct GenerationRequest {
  std::vector<std::filesystem::path> model;  // a folder, or the parts' files
  std::string prompt;
  std::string negative_prompt;                     // empty: the family's default
  std::optional<std::filesystem::path> image;      // start image (PNG, JPEG, WebP)
  std::optional<std::filesystem::path> end_image;  // end image (first–last frame), same formats
  // 0 (or unset) takes the model's default.
  int width = 0;
  int height = 0;
  int frames = 0;
  int fps = 0;
  int steps = 0;
  std::optional<float> guide_scale;
  // Two-expert models (Wan 2.2 A14B): guide_scale is the high-noise expert's, this the low-noise
  // expert's. Empty: the model's default (guide_scale's value when guide_scale is given).
  std::optional<float> low_noise_guide_scale;
  std::optional<double> shift;
  std::optional<std::string> sampler;  // a name the family lists in RequestRules::samplers
  std::uint64_t seed = 0;
  // Applied in this order, each with its own strength (the deltas add).
  std::vector<LoraChoice> loras;
  std::string preset = "auto";
  std::filesystem::path output;       // the video; a JSON sidecar goes next to it
  std::filesystem::path stats_jsonl;  // one line per step; empty: none
  // Replays across tools (ModelParts::noise_layout says the tensors): the initial noise read from
  // this safetensors file instead of drawn from the seed; empty: the seed's.
  std::filesystem::path noise;
  // Written when the run succeeds (safetensors, each through a temporary name): the initial noise
  // the run used, and its final latents before decoding (with the text encoder's output too when
  // save_text_states). Empty: not written.
  std::filesystem::path save_noise;
  std::filesystem::path save_latents;
  bool save_text_states = false;
  VideoDecoder decoder = VideoDecoder::kVae;
  // A run's final latents read from this safetensors file (what save_latents or a draft wrote,
  // ModelParts::latent_layout) instead of denoised: the run only decodes them. The other settings
  // must be those of the run that made them (its size and frames decide the shape). Empty: the
  // run denoises.
  std::filesystem::path latents;
  // The soundtrack also written as a 16-bit WAV here (models that make sound: RequestRules::
  // makes_sound), with the video and through a temporary name; empty: none.
  std::filesystem::path soundtrack_wav;
};

// A request with nothing left to choose.
struct ResolvedRequest {
  GenerationRequest request;  // as given
  std::string negative_prompt;
  int width = 0, height = 0, frames = 0, fps = 0, steps = 0;
  float guide_scale = 0;
  float low_noise_guide_scale = 0;  // two-expert models; guide_scale's value otherwise
  double shift = 0;
  std::string sampler;
  std::int64_t latent_frames = 0, latent_height = 0, latent_width = 0;
  // What the request asks that is allowed but probably not meant (a step-distillation LoRA with
  // CFG on, or with 50 steps): one sentence each, told to the user before the run.
  std::vector<std::string> warnings;
};

// What a model accepts and what it does by default: the engine decides, front ends ask.
// Terms a user confirms once before the app uses a family's weights (MiniMax-H3's community
// licence). The app shows them in a notice and stores the confirmation under `key`.
struct WeightsLicence {
  std::string key;           // names the confirmation in the app's settings: "h3"
  std::string model;         // whose weights: "MiniMax-H3"
  std::string name;          // "MiniMax H3 Community License"
  std::string url;           // where its text is
  std::string restrictions;  // what it restricts, completing "That license has …"
};

// The modes that follow from the frames given, in this order.
enum class FrameMode { kText, kFirstFrame, kLastFrame, kFirstLast };
FrameMode frame_mode(bool start_image, bool end_image);

struct RequestRules {
  int size_multiple = 16;  // width and height are multiples of it ...
  int min_size = 16;       // ... within [min_size, max_size]
  int max_size = 4096;
  int frames_step = 4;    // frames = frames_offset + frames_step·k (k ≥ 0) ...
  int frames_offset = 1;  // ... the shortest video
  int max_frames = 1001;  // ... up to this
  int max_steps = 1000;
  float max_guide_scale = 50;
  double max_shift = 100;
  bool takes_start_image = false;
  bool takes_end_image = false;  // first–last frame (an end image needs a start image)
  bool end_image_alone = false;  // ...unless this: a video that ends on the end image (H3's I2VA)
  bool makes_sound = false;      // the video has a soundtrack (H3), which can go to a WAV too
  // Two experts (Wan 2.2 A14B): the high-noise one denoises while the step's timestep is at
  // least expert_boundary·1000, the low-noise one after; each has its own guide scale.
  bool two_experts = false;
  double expert_boundary = 0;
  std::vector<std::string> samplers;  // the first is the default
  // Samplers whose recipe brings its own steps, guide scale and shift (a step-distilled one: 4
  // steps, no CFG): what resolve() fills in for them, and what the app switches to when one is
  // picked.
  struct SamplerDefaults {
    std::string sampler;
    int steps = 0;
    float guide_scale = 0;
    double shift = 0;
  };
  std::vector<SamplerDefaults> sampler_defaults;
  // The model's own defaults (a demo model's are small, so the demo runs in seconds).
  int width = 0, height = 0, frames = 0, fps = 0, steps = 0;
  float guide_scale = 0;
  float low_noise_guide_scale = 0;
  double shift = 0;
  std::string sampler;
  // A draft decode (VideoDecoder::kTaehvDraft) is possible: the set has a preview decoder, which
  // also makes each step's preview a picture. Without one, `preview_decoder_help` says how to get
  // one (which file, from where, where to put it); empty when the family has none to offer.
  bool draft_decode = false;
  std::string preview_decoder_help;
  // The model decodes a run's saved latents without denoising (GenerationRequest::latents).
  bool decodes_saved_latents = false;
  // Sizes to offer (the official ones first); each follows the rules above.
  std::vector<std::pair<int, int>> sizes;
  // The family's own names for the modes, indexed by FrameMode (H3: T2VA, I2VA (first frame),
  // I2VA (last frame), FL2VA); empty: the app says them in plain words.
  std::array<std::string, 4> mode_names;
  // A structured prompt the model was trained on, with <placeholders> to replace, that the app
  // offers (a plain prompt still works), and a line that says what it is; empty: none.
  std::string prompt_template;
  std::string prompt_template_help;
  std::optional<WeightsLicence> weights_licence;

  bool size_allowed(int w, int h) const;
  bool frames_allowed(int f) const;
};

// Error(kBadArgument) naming the setting and what is allowed unless `r`'s generic settings
// (size, frames, fps, steps, guide scale, shift, sampler) follow `rules`; `model` names the model
// in the message.
void check_request(const ResolvedRequest& r, const RequestRules& rules, const std::string& model);
// An end image without a start image, unless the model takes one alone (check_request runs it
// too; the pipeline runs it first, before any image is read). Error(kBadArgument).
void check_end_image(const GenerationRequest& request, const RequestRules& rules,
                     const std::string& model);

// What every run needs whatever the family: a prompt that is not blank, and an output that ends
// in the build's video extension (.mp4; .avi in builds without FFmpeg: media::video_extension())
// in a folder that exists; a WAV export, when asked, ends in .wav, is in a folder that exists and
// is not the output itself. Error(kBadArgument).
void check_run_inputs(const GenerationRequest& request);

}  // namespace ferry::models
