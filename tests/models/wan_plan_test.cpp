// The Wan family's plans (core/models/wan/parts.h, WanParts::plan): each block stage's plan is
// the planner's answer for that stage's layout — what `ferry-cli plan` and the app's preset panel
// show — the overall peaks are the largest stage's (stages run one after another), the start
// image's encode is planned like every other stage, and a budget that cannot hold a stage is
// refused before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <any>

#include "core/error.h"
#include "core/io/tensor_set.h"
#include "core/models/umt5/encoder_weights.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/dit_layout.h"
#include "core/models/wan/parts.h"
#include "core/models/wan/vae_plan.h"
#include "core/models/wan/vae_weights.h"
#include "core/offload/planner.h"
#include "core/pipeline/part_summary.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kGiB = 1ull << 30;

const WanParts& demo_parts() {
  static const test::ScratchDir dir;
  static const WanParts parts({write_demo_model(dir / "demo")});
  return parts;
}
const ModelSet& demo_set() {
  return demo_parts().set();
}

// The plan of a w × h × frames video (with a start image of that size when `image`).
GenerationPlan plan_generation(const offload::Preset& preset, const offload::MachineInfo& machine,
                               int w, int h, int frames, bool image = false) {
  GenerationRequest request;
  request.width = w;
  request.height = h;
  request.frames = frames;
  if (image) request.image = "start.png";
  const ResolvedRequest r =
      demo_parts().resolve(request, image ? std::optional(std::pair(w, h)) : std::nullopt);
  return demo_parts().plan(r, preset, machine, false);
}

const StagePlan& stage(const GenerationPlan& g, std::string_view name) {
  const auto it = std::find_if(g.stages.begin(), g.stages.end(),
                               [&](const StagePlan& s) { return s.stage == name; });
  if (it == g.stages.end()) throw std::runtime_error("no stage " + std::string(name));
  return *it;
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
    const GenerationPlan g = plan_generation(preset, laptop(), 256, 256, 17);
    ASSERT_EQ(g.stages.size(), 3u);

    // What cli/plan.cpp does, stage by stage.
    const auto encoder_set = io::TensorSet::open(set.text_encoder);
    const StagePlan& text = stage(g, kTextStage);
    const StagePlan& dit = stage(g, kDitStage);
    const offload::ModelLayout text_layout =
        models::umt5::EncoderWeights::from(encoder_set).model_layout();
    expect_same(text, offload::make_plan(text_layout, preset, laptop()), text_layout);
    const auto dit_set = io::TensorSet::open(set.dit);
    const offload::ModelLayout dit_layout =
        dit_model_layout(dit_set, 256, 256, 17, preset.chunk_tokens);
    expect_same(dit, offload::make_plan(dit_layout, preset, laptop()), dit_layout);
    EXPECT_EQ(g.stages[0].stage, "text encoder");
    EXPECT_EQ(g.stages[1].stage, "diffusion model");
    EXPECT_EQ(g.stages[2].stage, "VAE decode");
  }
}

TEST(StagePlans, OverallPeaksAreTheLargestStagesBecauseStagesRunOneAfterAnother) {
  const offload::Preset preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop());
  const GenerationPlan g = plan_generation(preset, laptop(), 256, 256, 17);
  const StagePlan& text = stage(g, kTextStage);
  const StagePlan& dit = stage(g, kDitStage);
  const StagePlan& vae = stage(g, kDecodeStage);
  EXPECT_EQ(g.predicted_vram_peak,
            std::max({text.predicted_vram_peak, dit.predicted_vram_peak, vae.predicted_vram_peak}));
  EXPECT_EQ(g.predicted_ram_peak,
            std::max({text.predicted_ram_peak, dit.predicted_ram_peak, vae.predicted_ram_peak}));
  // The VAE decode plans tiles, not blocks; at this size the demo VAE is its largest stage.
  EXPECT_EQ(vae.groups, 0u);
  EXPECT_FALSE(vae.detail.empty());
  const VaePlan& vae_plan = std::any_cast<const VaePlan&>(vae.family_plan);
  EXPECT_GE(vae.predicted_vram_peak, vae_plan.weight_bytes + vae_plan.arena_bytes);
  EXPECT_EQ(g.stages.size(), 3u);  // text encoder, diffusion model, VAE decode
}

TEST(StagePlans, ALargerVideoNeedsMoreWorkingMemoryForTheDiffusionModel) {
  const offload::Preset preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop());
  const GenerationPlan small = plan_generation(preset, laptop(), 128, 128, 5);
  const GenerationPlan large = plan_generation(preset, laptop(), 512, 512, 33);
  EXPECT_GT(stage(large, kDitStage).activation_bytes, stage(small, kDitStage).activation_bytes);
  EXPECT_EQ(stage(large, kTextStage).predicted_vram_peak,
            stage(small, kTextStage).predicted_vram_peak);
}

TEST(StagePlans, ABudgetThatCannotHoldAStageIsRefusedWithThePlannersMessage) {
  const offload::MachineInfo machine{false, 0, 0, 16 * kGiB, 12 * kGiB};
  offload::Preset tiny = offload::find_preset(offload::builtin_presets(), "cpu", machine);
  tiny.ram_budget_bytes = 1 * kMiB;
  try {
    plan_generation(tiny, machine, 256, 256, 17);
    FAIL() << "a 1 MiB budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDoesNotFit);
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

// The start image's encode is a stage of its own with a plan: its weights, its arena (the VAE's
// shape-only estimate) and the image, refused when they do not fit (it used to allocate unplanned).
TEST(StagePlans, TheStartImagesEncodeIsPlannedAndChecked) {
  const offload::Preset preset =
      offload::find_preset(offload::builtin_presets(), "laptop-8gb", laptop());
  const GenerationPlan g = plan_generation(preset, laptop(), 256, 256, 17, true);
  ASSERT_EQ(g.stages.size(), 4u);
  EXPECT_EQ(g.stages[1].stage, "VAE encode");
  const StagePlan& encode = stage(g, kImageStage);
  const VaeEncodePlan& p = std::any_cast<const VaeEncodePlan&>(encode.family_plan);
  EXPECT_GT(p.arena_bytes, 0u);
  EXPECT_EQ(encode.predicted_vram_peak, p.weight_bytes + p.arena_bytes + p.io_bytes);
  EXPECT_LE(encode.predicted_vram_peak, g.predicted_vram_peak);

  EXPECT_EQ(p.tiling.tile, 0) << "what fits untiled is encoded untiled, as the official code does";

  // Less than the untiled encode: the largest tile that fits, its plan within the budget.
  const VaeWeights vae = VaeWeights::shapes_only(demo_parts().vae());
  offload::Preset small = preset;
  small.vram_budget_bytes = p.weight_bytes + p.io_bytes + p.arena_bytes / 2;
  small.vram_headroom_bytes = 0;
  const VaeEncodePlan tiled = make_vae_encode_plan(vae, small, laptop(), 256, 256);
  EXPECT_GT(tiled.tiling.tile, 0);
  EXPECT_GE(tiled.tile_px, kMinVaeTilePx);
  EXPECT_GT(tiled.tiles, 1);
  EXPECT_EQ(tiled.arena_bytes,
            tiled_encode_arena_bytes(vae, tiled.tiling, 1, 256, 256, VaeOptions{}));
  EXPECT_LE(tiled.predicted_vram_peak, small.vram_budget_bytes);
  // One tile larger would not have fitted.
  const VaeTiling larger{
      tiled.tiling.tile + 1,
      std::min(tiled.tiling.tile, std::max<std::int64_t>(2, (tiled.tiling.tile + 1) / 4))};
  EXPECT_GT(tiled.weight_bytes + tiled.io_bytes +
                tiled_encode_arena_bytes(vae, larger, 1, 256, 256, VaeOptions{}),
            small.vram_budget_bytes);

  // Less than the smallest tile needs: refused, naming the tile.
  small.vram_budget_bytes = p.weight_bytes + p.io_bytes;
  try {
    make_vae_encode_plan(vae, small, laptop(), 256, 256);
    FAIL() << "an encode larger than the budget was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDoesNotFit);
    EXPECT_NE(std::string(e.what()).find("start image"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in tiles of 128 px"), std::string::npos) << e.what();
  }
}

TEST(StagePlans, APartIsSummarisedWithItsBytesOnDiskAndItsDtypes) {
  const pipeline::PartSummary dit = pipeline::summarize_part(demo_set().dit);
  EXPECT_EQ(dit.bytes, fs::file_size(demo_set().dit));
  ASSERT_FALSE(dit.dtypes.empty());
  for (const auto& d : dit.dtypes) EXPECT_FALSE(d.empty());
}

}  // namespace
}  // namespace ferry::models::wan
