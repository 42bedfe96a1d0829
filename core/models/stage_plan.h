// What a generation will do with memory before it starts: one plan per stage a model family runs
// (architecture.md §3.5), summarised as a user reads it, and the overall predicted peaks. The app's
// preset panel, `ferry-cli plan` (text and --json) and the run itself all use these same plans.
#pragma once

#include <any>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/offload/layer_group.h"
#include "core/offload/plan.h"
#include "core/offload/preset.h"

namespace ferry::models {

struct StagePlan {
  std::string stage;   // "text encoder", "diffusion model", "VAE decode"
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
  // Stages that do not stream blocks (a VAE decode) say what they do instead: "tile 256 px,
  // 28 tiles".
  std::string detail;
  offload::Plan plan;  // the planner's full answer (block stages; empty otherwise)
  struct Group {
    std::string name;
    std::uint64_t bytes = 0;
  };
  std::vector<Group> group_table;  // the layout's groups, in the order of plan.placement
  // The family's own plan for a stage that is not a block stage (Wan: its VaePlan), which the
  // family's run reads back: every stage is planned once, before any work.
  std::any family_plan;
  // False for a stage the family has no code for yet (H3's DiT and VAEs while they are being
  // written): it is listed with its weights and `detail` says so, but has no peaks and is not
  // counted in the run's.
  bool implemented = true;
  bool streams_blocks() const { return groups > 0; }
};

struct GenerationPlan {
  std::string preset;             // the preset the plans are for
  std::vector<StagePlan> stages;  // in the order they run
  // Stages run one after another, each freeing what it allocated: the peaks are the largest of
  // any stage's.
  std::uint64_t predicted_vram_peak = 0;
  std::uint64_t predicted_ram_peak = 0;

  // Adds a stage and raises the peaks.
  void add(StagePlan stage);
};

// A stage that streams `layout`'s blocks: the planner's plan under `preset` on `machine`
// (offload::make_plan; with `stream_all`, offload::streamed_plan: every block from disk). Throws
// Error(kDoesNotFit) with the planner's message.
StagePlan block_stage_plan(std::string stage, const offload::ModelLayout& layout,
                           const offload::Preset& preset, const offload::MachineInfo& machine,
                           bool stream_all);

}  // namespace ferry::models
