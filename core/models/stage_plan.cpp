#include "core/models/stage_plan.h"

#include <algorithm>
#include <utility>

#include "core/offload/planner.h"

namespace ferry::models {

void GenerationPlan::add(StagePlan stage) {
  predicted_vram_peak = std::max(predicted_vram_peak, stage.predicted_vram_peak);
  predicted_ram_peak = std::max(predicted_ram_peak, stage.predicted_ram_peak);
  stages.push_back(std::move(stage));
}

StagePlan block_stage_plan(std::string stage, const offload::ModelLayout& layout,
                           const offload::Preset& preset, const offload::MachineInfo& machine,
                           bool stream_all) {
  StagePlan s;
  s.stage = std::move(stage);
  s.layout = layout.name;
  s.weight_bytes = layout.weight_bytes();
  s.plan = stream_all ? offload::streamed_plan(layout, preset)
                      : offload::make_plan(layout, preset, machine);
  s.groups = layout.groups.size();
  for (const offload::LayerGroup& g : layout.groups) s.group_table.push_back({g.name, g.bytes()});
  s.resident_groups = s.plan.count(offload::Placement::kDevice);
  s.pinned_groups = s.plan.count(offload::Placement::kPinnedCache);
  s.disk_groups = s.plan.count(offload::Placement::kDisk);
  s.resident_bytes = s.plan.resident_bytes;
  s.pinned_cache_bytes = s.plan.pinned_cache_bytes;
  s.activation_bytes = s.plan.activation_bytes;
  s.predicted_vram_peak = s.plan.predicted_vram_peak;
  s.predicted_ram_peak = s.plan.predicted_ram_peak;
  return s;
}

}  // namespace ferry::models
