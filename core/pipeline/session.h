// The one way into the engine (architecture.md §9), for the app and ferry-cli alike:
//
//   Session session;                                  probe the machine, load the presets
//   auto model = session.find({folder});              the model set, its files opened once
//   auto r = session.validate(*model, request);       the family's rules, defaults filled in
//   auto plan = session.plan(*model, r);              every stage's plan, or a refusal
//   CancelToken cancel;                               one per run; cancel() from any thread
//   session.run(*model, request, sink, cancel);       the video, its sidecar, the stats
//
// The session decides which backend runs a preset (the GPU when the preset wants one and one is
// usable, else the CPU with the `cpu` preset, and says why), so front ends never choose
// backends, check sizes or plan on their own. A Session is cheap to query from any thread; run()
// may run on a worker thread while another thread plans.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/device.h"
#include "core/models/family.h"
#include "core/offload/cancel.h"
#include "core/offload/preset.h"
#include "core/pipeline/generator.h"

namespace ferry::pipeline {

using offload::CancelToken;

struct SessionOptions {
  // The machine to plan for instead of this one (ferry-cli plan --vram-mib, tests). A GPU it
  // describes is one runs still probe for: where none is usable, GPU presets fall back.
  std::optional<offload::MachineInfo> machine;
  // The presets to choose from instead of the built-ins and the user's folder (tests).
  std::optional<std::vector<offload::Preset>> presets;
  // The user's presets folder (<user data>/presets), read when `presets` is not given.
  std::filesystem::path user_presets;
  // The generator's options (the demo streams every block; tests add hooks).
  GeneratorOptions generator;
};

// Which preset runs and where, decided by the engine.
struct RunTarget {
  offload::Preset preset;  // the one that runs (`cpu` when a GPU preset falls back)
  bool on_gpu = false;
  std::string device;  // what runs it: "NVIDIA GeForce RTX 4060 Laptop GPU (sm_89)", "CPU"
  bool fell_back_to_cpu = false;
  std::string reason;  // why it fell back: "no NVIDIA driver is installed", ...
};

using ModelHandle = std::shared_ptr<const models::ModelParts>;

class Session {
 public:
  explicit Session(SessionOptions options = {});

  const offload::MachineInfo& machine() const { return machine_; }
  const std::vector<offload::Preset>& presets() const { return presets_; }
  // One line for logs and the machine check: "GPU: <name> (8.0 GiB, sm_89), RAM 31.2 GiB" or
  // "no usable GPU (why); RAM ...".
  std::string machine_summary() const;

  // The preset `name` ("auto" included) and where it runs. Error(kBadArgument) listing the names.
  RunTarget target(std::string_view preset_name) const;

  // The model set in `paths`, recognised by its family, its files opened and validated once.
  // Error(kBadModelFile) / Error(kIo) / Error(kBadArgument) saying what is missing or wrong.
  ModelHandle find(const std::vector<std::filesystem::path>& paths) const;

  // Writes the demo model of `family` (empty: Wan's, the demo `ferry-cli demo` has always made,
  // else the first family with one) into `folder` and returns the folder, ready for find().
  // Error(kIo) when it cannot be written; kUnsupported when the family has no demo.
  std::filesystem::path write_demo_model(const std::filesystem::path& folder,
                                         std::string_view family = {}) const;

  // The request with every default filled in, checked by the model's family (the start image's
  // size read from its file). Error(kBadArgument) naming the setting and what is allowed.
  ResolvedRequest validate(const models::ModelParts& model, const GenerationRequest& request) const;

  // Every stage's plan under the preset the request names, as it will run here (GPU presets
  // fall back to `cpu` without a usable GPU). Error(kDoesNotFit) saying what would fit.
  models::GenerationPlan plan(const models::ModelParts& model,
                              const ResolvedRequest& request) const;

  // Runs the job: the backend started for the request's preset, the sink told of a fallback
  // (note()), stages, steps and previews, ending with the video and its sidecar written. Throws
  // Error (as pipeline::generate); kCancelled once `cancel` is cancelled.
  GenerationResult run(const models::ModelParts& model, const GenerationRequest& request,
                       ProgressSink& sink, CancelToken& cancel) const;

 private:
  SessionOptions options_;
  offload::MachineInfo machine_;
  std::vector<offload::Preset> presets_;
  std::optional<DeviceProperties> gpu_;  // the GPU that GPU presets run on
  std::string gpu_missing_;              // why there is no usable GPU; empty when there is one
};

}  // namespace ferry::pipeline
