// The main job: prompt (+ start image) → MP4. Stages run one after another and each frees
// everything it allocated before the next plans (architecture.md §3.5):
//   text      the prompt and the negative prompt tokenized and encoded together (umT5 streamed)
//   image     TI2V only: the start image resized, cropped and encoded by the VAE to z0
//   denoise   the sampler's steps, each a CFG pair of DiT passes on every loaded block (the DiT
//             streamed under the preset's plan); per-step telemetry and a preview
//   decode    the VAE decode (tiled as the preset says), frames to 8-bit RGB
//   write     H.264 MP4 with the settings in its metadata, and a JSON sidecar, both written to a
//             temporary name and renamed
// Cancellation (any thread) is honoured within one layer: the running stage's weight streamer is
// cancelled, its acquire() throws Error(kCancelled), and nothing is left half-written.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/media/image.h"
#include "core/offload/preset.h"
#include "core/offload/streamer.h"
#include "core/offload/telemetry.h"
#include "core/pipeline/request.h"

namespace ferry::pipeline {

enum class Stage { kText, kImage, kDenoise, kDecode, kWrite };
std::string_view stage_name(Stage stage);  // "encoding the prompt", ...

struct StepProgress {
  int step = 0;  // 1-based
  int steps = 0;
  double seconds_per_step = 0;  // mean so far
  double eta_seconds = 0;
  offload::StepStats stats;
};

// Called on the thread that runs generate(); the GUI re-posts them to its own thread.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void stage(Stage) {}
  virtual void step(const StepProgress&) {}
  // The denoised estimate's first frame, small and cheap (a channel projection of the latent,
  // not a VAE decode).
  virtual void preview(const media::RgbImage&) {}
};

struct GenerationResult {
  std::filesystem::path video;
  std::filesystem::path sidecar;
  ResolvedRequest settings;
  std::string encoder;  // "libx264", ...
  std::vector<offload::StepStats> steps;
  std::vector<offload::StageStats> stages;  // text, [image,] denoise, decode (with the write)
  std::uint64_t peak_device_bytes = 0;      // the largest of any stage's plan
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
};

class Generator {
 public:
  // `backend` runs every stage; `machine` and `presets` are what the plan is made for.
  Generator(Backend& backend, offload::MachineInfo machine, std::vector<offload::Preset> presets,
            GeneratorOptions options = {});

  // Runs the whole job. Throws Error: kBadArgument (request), kBadModelFile / kMissingTensor
  // (model parts), kDoesNotFit (a stage's plan does not fit the preset), kIo, kOutOfMemory,
  // kCancelled, kUnsupported (no video encoder, no tokenizer in this build).
  GenerationResult generate(const GenerationRequest& request, ProgressSink& sink);

  // From any thread: the running generate() stops within one layer with Error(kCancelled).
  void cancel();

 private:
  // The streamer of the running stage, for cancel().
  void set_active(offload::WeightStreamer* streamer);
  void check_cancelled() const;

  Backend& backend_;
  offload::MachineInfo machine_;
  std::vector<offload::Preset> presets_;
  GeneratorOptions options_;
  std::atomic<bool> cancelled_{false};
  std::mutex active_mutex_;
  offload::WeightStreamer* active_ = nullptr;
};

}  // namespace ferry::pipeline
