#include "core/pipeline/stage_plans.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/io/safetensors_set.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/vae_weights.h"
#include "core/offload/planner.h"
#include "core/tensor/dtype.h"

namespace ferry::pipeline {
namespace {

StagePlan stage_plan(std::string stage, const offload::ModelLayout& layout,
                     const offload::Preset& preset, const offload::MachineInfo& machine) {
  StagePlan s;
  s.stage = std::move(stage);
  s.layout = layout.name;
  s.weight_bytes = layout.weight_bytes();
  s.plan = offload::make_plan(layout, preset, machine);
  s.groups = layout.groups.size();
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

}  // namespace

std::vector<const StagePlan*> GenerationPlan::stages() const {
  std::vector<const StagePlan*> out;
  if (text_encoder) out.push_back(&*text_encoder);
  if (dit) out.push_back(&*dit);
  if (vae) out.push_back(&*vae);
  return out;
}

GenerationPlan plan_generation(const ModelSet& set, const offload::Preset& preset,
                               const offload::MachineInfo& machine, int width, int height,
                               int frames) {
  GenerationPlan g;
  {
    const io::SafetensorsSet encoder = io::SafetensorsSet::open(set.text_encoder);
    const auto weights = models::umt5::EncoderWeights::from(encoder);
    g.text_encoder = stage_plan("text encoder", weights.model_layout(), preset, machine);
  }
  {
    const io::SafetensorsSet dit = io::SafetensorsSet::open(set.dit);
    g.dit = stage_plan(
        "diffusion model",
        models::wan::dit_model_layout(dit, width, height, frames, preset.ffn_chunk_tokens), preset,
        machine);
  }
  {
    const io::SafetensorsSet vae = io::SafetensorsSet::open(set.vae);
    const auto weights = models::wan::VaeWeights::shapes_only(vae);
    g.vae_plan = offload::make_vae_plan(weights, preset, machine, width, height, frames);
    StagePlan s;
    s.stage = "VAE decode";
    s.layout = std::string(models::wan::vae_kind_name(weights.config().kind));
    s.weight_bytes = g.vae_plan->weight_bytes;
    s.activation_bytes = g.vae_plan->arena_bytes;
    s.predicted_vram_peak = g.vae_plan->predicted_vram_peak;
    s.predicted_ram_peak = g.vae_plan->predicted_ram_peak;
    s.detail = g.vae_plan->mode == offload::VaeDecodeMode::kUntiled
                   ? "untiled"
                   : "tile " + std::to_string(g.vae_plan->tile_px) + " px, " +
                         std::to_string(g.vae_plan->tiles) + " tiles";
    if (g.vae_plan->activations == DType::kBF16) s.detail += ", bf16 activations";
    g.vae = std::move(s);
  }
  for (const StagePlan* s : g.stages()) {
    g.predicted_vram_peak = std::max(g.predicted_vram_peak, s->predicted_vram_peak);
    g.predicted_ram_peak = std::max(g.predicted_ram_peak, s->predicted_ram_peak);
  }
  return g;
}

PartSummary summarize_part(const std::filesystem::path& path) {
  const io::SafetensorsSet set = io::SafetensorsSet::open(path);
  PartSummary summary;
  std::map<std::string, std::uint64_t> by_dtype;
  for (const auto& entry : set.entries()) {
    by_dtype[std::string(dtype_name(entry.tensor->dtype))] += entry.tensor->bytes;
  }
  for (const auto& file : set.files()) summary.bytes += file.file_size();
  std::vector<std::pair<std::string, std::uint64_t>> sorted(by_dtype.begin(), by_dtype.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (auto& [name, bytes] : sorted) summary.dtypes.push_back(name);
  return summary;
}

}  // namespace ferry::pipeline
