// A model family (architecture.md §9): what the engine needs from a kind of model — Wan today,
// MiniMax-H3 and others later — so that a new family is added by adding its folder
// (core/models/<name>/) and nothing else. A family:
//
//   recognises its parts in what the user points at   ModelFamily::recognise → ModelParts
//   says what one loose file is (the model library)    ModelFamily::sketch_part → PartSketch
//   says what a request may ask and fills defaults     ModelParts::rules / resolve
//   plans every stage before any work                  ModelParts::plan → GenerationPlan
//   runs its stages, one after another                 ModelParts::start → FamilyRun
//   has a demo model (optional)                        ModelFamily::write_demo_model
//
// Registration: a folder's `family.cpp` defines `const ModelFamily& <name>_family()`; the build
// lists every core/models/*/family.cpp and generates the registry (core/CMakeLists.txt), so no
// switch anywhere names the families. The pipeline (core/pipeline/session.h) drives the stages
// generically: it gives each a RunContext (backend, preset, cancel token, telemetry, where
// previews and frames go) and owns everything around them (the stats file, the video file, its
// metadata, the sidecar, the run log). A stage frees everything it allocated before the next one
// plans (architecture.md §3.5); state that crosses stages (text embeddings, the latent) lives in
// the FamilyRun.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/media/audio.h"
#include "core/media/image.h"
#include "core/models/part_sketch.h"
#include "core/models/request.h"
#include "core/models/stage_plan.h"
#include "core/offload/cancel.h"
#include "core/offload/preset.h"
#include "core/offload/streamer.h"
#include "core/offload/telemetry.h"

namespace ferry::models {

// The stages a family may have, in the order the pipeline runs them.
enum class StageKind { kText, kImage, kDenoise, kDecode, kWrite };
std::string_view stage_name(StageKind stage);  // "encoding the prompt", ...
std::string_view stage_key(StageKind stage);   // "text", "image", ... (stats and logs)

// One file of a model set. A clip's metadata records its role, file name (never the folder: a
// shared clip must not leak the user's folder names), size and content fingerprint.
struct PartFile {
  std::string role;  // "diffusion model", "text encoder", "VAE"
  std::filesystem::path path;
  std::uint64_t bytes = 0;
};

// A named tensor of a replay file (noise in, noise and latents out): f32, this shape.
struct TensorLayout {
  std::string name;                  // "noise"
  std::vector<std::uint64_t> shape;  // [C, T, h, w]
};

// A tensor a stage hands out (the text encoder's output), in its own dtype.
struct TensorBytes {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::uint64_t> shape;
  std::span<const std::byte> bytes;
};

// What a LoRA file adapts in a model set: the app's LoRA list ("312 of 312 layers") and the
// CLI's report. A module is one adapted tensor: a low-rank pair (down/A, up/B), or a full delta
// (.diff, .diff_b, diff_m).
struct LoraReport {
  std::filesystem::path path;
  std::uint64_t bytes = 0;             // the file's size
  std::size_t modules = 0;             // modules the file adapts
  std::size_t matched = 0;             // of which adapt a tensor of this model
  std::vector<std::string> unmatched;  // up to 3 of the others, as the file names them
  std::uint64_t adapter_bytes = 0;     // the matched tensors' bytes (a run streams them)
  // 4 for a step-distillation LoRA (LightX2V, Lightning: recognised by its file name), else 0:
  // the app then offers the distilled sampler.
  int distilled_steps = 0;
};

// The images a request conditions on, decoded (GenerationRequest::image and end_image).
struct FrameImages {
  std::optional<media::RgbImage> start;
  std::optional<media::RgbImage> end;
};

// What the pipeline gives a running stage.
struct RunContext {
  Backend& backend;
  const offload::Preset& preset;
  const offload::MachineInfo& machine;
  offload::CancelToken& cancel;
  offload::Telemetry& telemetry;      // a denoise stage opens and closes a step per step
  offload::StreamerOptions streamer;  // every stage's streamer options (tests add hooks)
  bool stream_all = false;            // the demo: every block from disk
  // A small image of the work so far, after each denoising step.
  std::function<void(const media::RgbImage&)> preview;
  // Decoded frames, [3, count, H, W] in [-1, 1], in order: the pipeline writes them.
  std::function<void(std::int64_t count, std::span<const float> pixels)> frames;
  // Replays and tests. initial_noise fills the noise tensor `name` (of noise_layout) instead of the
  // seed; noise_used sees each noise tensor as the run starts from it; final_latent each latent
  // tensor (of latent_layout) before it is decoded; text_state each tensor of the text stage's
  // output; saved_latent fills the latent tensor `name` (of latent_layout) from the request's
  // latents file (GenerationRequest::latents: the run decodes it instead of denoising). Each may
  // be empty.
  std::function<void(std::string_view name, std::span<float>)> initial_noise;
  std::function<void(std::string_view name, std::span<const float>)> noise_used;
  std::function<void(std::string_view name, std::span<const float>)> final_latent;
  std::function<void(const TensorBytes&)> text_state;
  std::function<void(std::string_view name, std::span<float>)> saved_latent;
  // The small animated preview: every latent frame of the work so far as a small picture, after
  // the steps whose picture preview was made (only with a TAEHV decoder). Empty: not wanted.
  std::function<void(const std::vector<media::RgbImage>&)> preview_frames;
  // The soundtrack of a family that makes sound (H3), given once before the first frame: the
  // pipeline's video opens with it. Empty for a silent family (Wan never calls it).
  std::function<void(media::AudioTrack)> soundtrack;
};

// One generation's stages. run_stage is called once per stage of stages(), in that order.
class FamilyRun {
 public:
  virtual ~FamilyRun() = default;
  virtual std::vector<StageKind> stages() const = 0;
  virtual void run_stage(StageKind stage, RunContext& context) = 0;
};

// A family's parts, found in a folder and opened once (headers parsed and validated): every later
// call reads these, never the folder again.
class ModelParts {
 public:
  virtual ~ModelParts() = default;
  virtual std::string_view family() const = 0;  // "wan"
  virtual std::string name() const = 0;         // "ti2v-5b"
  virtual bool is_demo() const = 0;
  // One line per part: "diffusion model: ti2v-5b (3072 wide, 30 blocks) in transformer/…".
  virtual std::vector<std::string> describe() const = 0;
  virtual std::vector<PartFile> files() const = 0;
  virtual RequestRules rules() const = 0;
  // Fills the defaults and checks the request (Error(kBadArgument) naming the setting).
  // `image_size` is the start image's (width, height) when there is one.
  virtual ResolvedRequest resolve(const GenerationRequest& request,
                                  std::optional<std::pair<int, int>> image_size) const = 0;
  // The LoRA at `path` checked against these parts (header reads only). Error(kBadModelFile) for
  // a file that is not a LoRA Ferry applies (a pickle, truncated, no LoRA tensor, LoHa / LoKr /
  // DoRA) or that does not fit this model (a shape disagrees: a LoRA for another model size, or
  // no module adapts a tensor of it), the message naming the file and the first disagreement.
  virtual LoraReport check_lora(const std::filesystem::path& path) const = 0;
  // The tensors a run's initial noise is made of, and those of its final latents, for `request`
  // (what --noise reads and --save-noise / --save-latents write).
  virtual std::vector<TensorLayout> noise_layout(const ResolvedRequest& request) const = 0;
  virtual std::vector<TensorLayout> latent_layout(const ResolvedRequest& request) const = 0;
  // Every stage's plan (Error(kDoesNotFit) when one does not fit).
  virtual GenerationPlan plan(const ResolvedRequest& request, const offload::Preset& preset,
                              const offload::MachineInfo& machine, bool stream_all) const = 0;
  // The stages of one generation; `plan` is what plan() returned for the same request.
  virtual std::unique_ptr<FamilyRun> start(const ResolvedRequest& request,
                                           const GenerationPlan& plan,
                                           FrameImages images) const = 0;
};

// What a family's open() throws when nothing among the paths is one of its parts (an
// Error(kBadModelFile) like any other): open_model then reports a family that did find its parts,
// so a Wan folder with a part missing is told about Wan, not about H3.
class NotThisFamily : public Error {
 public:
  explicit NotThisFamily(std::string message)
      : Error(ErrorCode::kBadModelFile, std::move(message)) {}
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual std::string_view name() const = 0;  // the folder's name: "wan"
  // The family's parts in `paths` (folders searched recursively, files as they are), opened and
  // validated. Error(kBadModelFile) naming what is missing or disagrees (no diffusion model of
  // this family among them included); Error(kIo) when a folder cannot be read.
  virtual std::unique_ptr<ModelParts> open(
      const std::vector<std::filesystem::path>& paths) const = 0;
  // What `set` is to this family, from its names and shapes alone (part_sketch.h); nullopt when it
  // is none of its parts. Never throws for a set that is not one of its parts.
  virtual std::optional<PartSketch> sketch_part(const io::TensorSet& set) const = 0;
  // The same for a file io::TensorSet::open refused with Error(kUnsupported) — a layout of which
  // Ferry reads the header alone, as H3's open() does for DiffSynth's NF4 audio VAE. None by
  // default.
  virtual std::optional<PartSketch> sketch_unopenable_part(const std::filesystem::path&) const {
    return std::nullopt;
  }
  // Writes the family's demo model into `folder` and returns it; nullopt when it has none.
  virtual std::optional<std::filesystem::path> write_demo_model(
      const std::filesystem::path& folder) const = 0;
};

// Every family this build has (generated from core/models/*/family.cpp).
const std::vector<const ModelFamily*>& model_families();
const ModelFamily* find_family(std::string_view name);

// The parts in `paths`, opened by the first family whose open() succeeds; when none does, the
// first error that is not NotThisFamily (the error of a family that recognised its parts; with one
// family, exactly its message), else a NotThisFamily.
std::unique_ptr<ModelParts> open_model(const std::vector<std::filesystem::path>& paths);

}  // namespace ferry::models
