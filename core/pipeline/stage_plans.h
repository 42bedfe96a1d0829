// What a generation will do with memory before it starts: the residency plan of each stage the
// generator runs (architecture.md §3.5) for a model set, a preset, a machine and a video size,
// and the overall predicted peaks. The GUI's preset panel shows this; `ferry-cli plan` prints the
// same plans (the same planner calls on the same layouts), so the two always agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/offload/plan.h"
#include "core/offload/preset.h"
#include "core/offload/vae_plan.h"
#include "core/pipeline/model_set.h"

namespace ferry::pipeline {

// One stage's plan, summarised as a user reads it.
struct StagePlan {
  std::string stage;   // "text encoder", "diffusion model"
  std::string layout;  // the layout's name ("Wan 2.2 TI2V-5B DiT")
  std::uint64_t weight_bytes = 0;
  std::size_t groups = 0;
  std::size_t resident_groups = 0;  // on the device for the whole stage
  std::size_t pinned_groups = 0;    // cached in pinned RAM
  std::size_t disk_groups = 0;      // streamed from the model file every pass
  std::uint64_t resident_bytes = 0;
  std::uint64_t pinned_cache_bytes = 0;
  std::uint64_t activation_bytes = 0;
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;
  // Stages that do not stream blocks (the VAE decode) say what they do instead: "tile 256 px,
  // 28 tiles".
  std::string detail;
  offload::Plan plan;  // the planner's full answer (block stages)
};

struct GenerationPlan {
  std::optional<StagePlan> text_encoder;
  std::optional<StagePlan> dit;
  std::optional<StagePlan> vae;  // "VAE decode"
  std::optional<offload::VaePlan> vae_plan;
  // Stages run one after another, each freeing what it allocated: the peaks are the largest of
  // any stage's.
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;
  std::vector<const StagePlan*> stages() const;
};

// The plans of the text encoder (umT5, its own layout), of the diffusion model (the DiT for
// width × height × frames, FFN chunked as the preset says) and of the VAE decode
// (offload::make_vae_plan) under `preset` on `machine`, exactly as the generator makes them. Throws
// Error(kDoesNotFit) with the planner's message when a stage does not fit, and the errors of
// opening the model files.
GenerationPlan plan_generation(const ModelSet& set, const offload::Preset& preset,
                               const offload::MachineInfo& machine, int width, int height,
                               int frames);

// A model part's files as a user sees them: bytes on disk and the dtypes of its tensors.
struct PartSummary {
  std::uint64_t bytes = 0;
  std::vector<std::string> dtypes;  // "BF16", "F8_E4M3", ... most bytes first
};
// Throws the errors of opening `path` (kIo, kBadModelFile).
PartSummary summarize_part(const std::filesystem::path& path);

}  // namespace ferry::pipeline
