// plan_generation (core/pipeline/stage_plans.h): each stage's plan is the planner's answer for that
// stage's layout — the same calls `ferry-cli plan` makes — the overall peaks are the largest
// stage's, and a budget that cannot hold a stage is refused with the planner's message.
#include "core/pipeline/stage_plans.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "core/io/safetensors_set.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/wan/dit_layout.h"
#include "core/offload/planner.h"
#include "core/pipeline/demo_model.h"
#include "tests/test_support.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

const ModelSet& demo_set() {
  static const test::ScratchDir dir;
  static const ModelSet set = find_model_set({write_demo_model(dir / "demo")});
  return set;
}

offload::MachineInfo laptop() {
  return {true, 8 * kGiB, 8 * kGiB, 32 * kGiB, 24 * kGiB};
}

void expect_same(const StagePlan& s, const offload::Plan& p, const offload::ModelLayout& layout) {
  EXPECT_EQ(s.layout, layout.name);
  EXPECT_EQ(s.weight_bytes, layout.weight_bytes());
  EXPECT_EQ(s.groups, layout.groups.size());
  EXPECT_EQ(s.plan.placement, p.placement);
  EXPECT_EQ(s.resident_groups, p.count(offload::Placement::kDevice));
  EXPECT_EQ(s.pinned_groups, p.count(offload::Placement::kPinnedCache));
  EXPECT_EQ(s.disk_groups, p.count(offload::Placement::kDisk));
  EXPECT_EQ(s.resident_groups + s.pinned_groups + s.disk_groups, s.groups);
  EXPECT_EQ(s.resident_bytes, p.resident_bytes);
  EXPECT_EQ(s.pinned_cache_bytes, p.pinned_cache_bytes);
  EXPECT_EQ(s.activation_bytes, p.activation_bytes);
  EXPECT_EQ(s.predicted_vram_peak, p.predicted_vram_peak);
  EXPECT_EQ(s.predicted_ram_peak, p.predicted_ram_peak);
}

TEST(StagePlans, EachStageIsThePlanFerryCliPlanMakesForItsLayout) {
  const ModelSet& set = demo_set();
  for (const char* name : {"laptop-8gb", "laptop-6gb", "desktop-24gb", "cpu"}) {
    SCOPED_TRACE(name);
    const offload::Preset preset = offload::find_preset(offload::builtin_presets(), name, laptop());
    const GenerationPlan g = plan_generation(set, preset, laptop(), 256, 256, 17);
    ASSERT_TRUE(g.text_encoder && g.dit);

    // What cli/plan.cpp does, stage by stage.
    const auto encoder_set = io::SafetensorsSet::open(set.text_encoder);
    const offload::ModelLayout text_layout =
        models::umt5::EncoderWeights::from(encoder_set).model_layout();
    expect_same(*g.text_encoder, offload::make_plan(text_layout, preset, laptop()), text_layout);
    const auto dit_set = io::SafetensorsSet::open(set.dit);
    const offload::ModelLayout dit_layout =
        models::wan::dit_model_layout(dit_set, 256, 256, 17, preset.ffn_chunk_tokens);
    expect_same(*g.dit, offload::make_plan(dit_layout, preset, laptop()), dit_layout);
    EXPECT_EQ(g.text_encoder->stage, "text encoder");
    EXPECT_EQ(g.dit->stage, "diffusion model");
  }
}

TEST(StagePlans, OverallPeaksAreTheLargestStagesBecauseStagesRunOneAfterAnother) {
  const offload::Preset preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop());
  const GenerationPlan g = plan_generation(demo_set(), preset, laptop(), 256, 256, 17);
  EXPECT_EQ(g.predicted_vram_peak,
            std::max({g.text_encoder->predicted_vram_peak, g.dit->predicted_vram_peak,
                      g.vae->predicted_vram_peak}));
  EXPECT_EQ(g.predicted_ram_peak, std::max({g.text_encoder->predicted_ram_peak,
                                            g.dit->predicted_ram_peak, g.vae->predicted_ram_peak}));
  // The VAE decode plans tiles, not blocks; at this size the demo VAE is its largest stage.
  EXPECT_EQ(g.vae->groups, 0u);
  EXPECT_FALSE(g.vae->detail.empty());
  EXPECT_GE(g.vae->predicted_vram_peak, g.vae_plan->weight_bytes + g.vae_plan->arena_bytes);
  EXPECT_EQ(g.stages().size(), 3u);  // text encoder, diffusion model, VAE decode
}

TEST(StagePlans, ALargerVideoNeedsMoreWorkingMemoryForTheDiffusionModel) {
  const offload::Preset preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop());
  const GenerationPlan small = plan_generation(demo_set(), preset, laptop(), 128, 128, 5);
  const GenerationPlan large = plan_generation(demo_set(), preset, laptop(), 512, 512, 33);
  EXPECT_GT(large.dit->activation_bytes, small.dit->activation_bytes);
  EXPECT_EQ(large.text_encoder->predicted_vram_peak, small.text_encoder->predicted_vram_peak);
}

TEST(StagePlans, ABudgetThatCannotHoldAStageIsRefusedWithThePlannersMessage) {
  const offload::MachineInfo machine{false, 0, 0, 16 * kGiB, 12 * kGiB};
  offload::Preset tiny = offload::find_preset(offload::builtin_presets(), "cpu", machine);
  tiny.ram_budget_bytes = 1 * kMiB;
  try {
    plan_generation(demo_set(), tiny, machine, 256, 256, 17);
    FAIL() << "a 1 MiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDoesNotFit);
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

TEST(StagePlans, APartIsSummarisedWithItsBytesOnDiskAndItsDtypes) {
  const PartSummary dit = summarize_part(demo_set().dit);
  EXPECT_EQ(dit.bytes, fs::file_size(demo_set().dit));
  ASSERT_FALSE(dit.dtypes.empty());
  for (const auto& d : dit.dtypes) EXPECT_FALSE(d.empty());
}

}  // namespace
}  // namespace ferry::pipeline
