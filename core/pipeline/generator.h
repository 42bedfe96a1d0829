// The main job, driven generically for any model family (core/models/family.h): the request
// resolved by the family, every stage planned before any work, then the family's stages one after
// another — each freeing everything it allocated before the next plans (architecture.md §3.5) —
// with the pipeline's part around them:
//   telemetry   a JSON line per step and per stage in the stats file, steps to the sink
//   video       decoded frames to 8-bit RGB into the video writer, written to a temporary name
//               and renamed when complete, with the settings in its metadata
//   sidecar     the same settings as JSON next to the video (written atomically)
// Cancellation is the run's CancelToken, honoured within one layer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/media/image.h"
#include "core/models/family.h"
#include "core/models/request.h"
#include "core/offload/cancel.h"
#include "core/offload/preset.h"
#include "core/offload/streamer.h"
#include "core/offload/telemetry.h"

namespace ferry::pipeline {

using models::GenerationRequest;
using models::ResolvedRequest;
using Stage = models::StageKind;
using models::stage_name;

struct StepProgress {
  int step = 0;  // 1-based
  int steps = 0;
  double seconds_per_step = 0;  // mean so far
  double eta_seconds = 0;
  offload::StepStats stats;
};

// Called on the thread that runs the job; the GUI re-posts them to its own thread.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void stage(Stage) {}
  virtual void step(const StepProgress&) {}
  // The denoised estimate's first frame, small and cheap (not a VAE decode).
  virtual void preview(const media::RgbImage&) {}
  // The small animated preview (RunContext::preview_frames): every latent frame of the denoised
  // estimate as a small picture, after each step whose picture preview was made, when the model
  // set has a TAEHV decoder. Decoding them costs time, so only sinks that show them ask.
  virtual bool wants_preview_frames() const { return false; }
  virtual void preview_frames(const std::vector<media::RgbImage>&) {}
  // Something the user should know that is not an error ("no usable GPU: the cpu preset runs").
  virtual void note(const std::string&) {}
  // What the request asks that is allowed but probably not meant (ResolvedRequest::warnings),
  // before the first stage. By default a note that starts "warning: ".
  virtual void warning(const std::string& text) { note("warning: " + text); }
};

struct GenerationResult {
  std::filesystem::path video;
  std::filesystem::path sidecar;
  ResolvedRequest settings;
  std::string model;    // the model's name ("ti2v-5b")
  std::string preset;   // the preset that ran
  std::string encoder;  // "libx264", ...
  std::vector<offload::StepStats> steps;
  std::vector<offload::StageStats> stages;  // text, [image,] denoise, decode (with the write)
  std::uint64_t peak_device_bytes = 0;      // the largest of any stage's plan
  // The final latents written beside the video (a draft keeps them for a full decode later) or
  // where save_latents said; empty when none were written.
  std::filesystem::path latents;
  // The soundtrack's WAV (GenerationRequest::soundtrack_wav); empty when none was written.
  std::filesystem::path soundtrack_wav;
};

struct GeneratorOptions {
  // Device memory readings for telemetry (CUDA: the driver's used bytes); empty on the CPU.
  offload::Telemetry::DeviceSampler device_memory;
  // Streamer options (tests shorten eviction windows, add stage hooks).
  offload::StreamerOptions streamer;
  // Stream every block from disk whatever the budget allows (offload::streamed_plan): the demo
  // shows the disk path on any machine.
  bool stream_all = false;
  // Tests: fill the initial latent [C, T, h, w] instead of the seed's noise (the reference's
  // injected noise), and see the final latent before it is decoded.
  std::function<void(std::span<float>)> initial_noise;
  std::function<void(std::span<const float>)> final_latent;
  // Tests: each decoded chunk's pixels [3, count, H, W] (frames first_frame ..), before the
  // conversion to 8 bits.
  std::function<void(std::int64_t first_frame, std::int64_t count, std::span<const float> pixels)>
      decoded_frames;
  // Told to the sink (ProgressSink::note) once the request, its plan and its inputs have passed
  // every check, before the first stage (where the run goes, a fallback and why).
  std::vector<std::string> notes;
};

// Where a draft keeps its final latents when the request names no save_latents file: beside the
// video, "<stem>.latents.safetensors" (the app's default for saved latents too).
std::filesystem::path draft_latents_path(const std::filesystem::path& video);

// Error(kBadArgument) unless `parts` can do what `request` asks of its decode: a draft needs a
// family and a model set that have a draft decoder (the family's own message first: resolve()),
// saved latents a family that decodes them, and saved latents are not combined with the options
// of a denoising run (--noise, --save-noise, --save-latents, --save-text-states).
void check_decode_request(const models::ModelParts& parts, const GenerationRequest& request);

// Runs one job on `backend` for `machine` under `preset`: `parts` is the opened model set.
// Throws Error: kBadArgument (request), kBadModelFile / kMissingTensor (model parts), kDoesNotFit
// (a stage's plan does not fit the preset), kIo, kOutOfMemory, kCancelled (through `cancel`),
// kUnsupported (no video encoder, no image reader in this build).
GenerationResult generate(Backend& backend, const offload::MachineInfo& machine,
                          const offload::Preset& preset, const models::ModelParts& parts,
                          const GenerationRequest& request, ProgressSink& sink,
                          offload::CancelToken& cancel, const GeneratorOptions& options = {});

}  // namespace ferry::pipeline
