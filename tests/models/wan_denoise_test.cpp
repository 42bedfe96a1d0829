// The denoising loop against the official Wan loop (tools/reference/make_denoise_reference.py:
// the tiny DiTs of tests/data/wan/dit/ driving 4-step UniPC and Euler with CFG, and a TI2V
// image-to-video UniPC run) and against LightX2V's step-distilled loop without CFG
// (make_distill_reference.py, T2V and TI2V image-to-video); the loop with its blocks streamed from
// disk or pinned RAM gives the resident run's latents bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/io/tensor_file.h"
#include "core/io/tensor_set.h"
#include "core/models/wan/denoise.h"
#include "core/models/wan/dit.h"
#include "core/models/wan/sampler.h"
#include "core/models/wan/ti2v.h"
#include "core/offload/planner.h"
#include "core/offload/streamer.h"
#include "core/tensor/convert.h"
#include "tests/models/model_test_backend.h"
#include "tests/models/model_test_tensors.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

namespace wan = models::wan;
using offload::Placement;
using offload::Plan;
using offload::ReadMethod;

// Ferry's latent after each step against the official one, relative to the official latent's
// size (max |difference| / max |x|, and RMS difference / RMS(x)). One DiT forward is at the bf16
// floor (wan_dit_test.cpp: ≈1e-3 of the velocity); the loop feeds each step's error into the next,
// and guidance multiplies the cond-uncond difference by 5, so the floor roughly doubles per step.
// How big that floor is: perturbing the reference's own noise by 1e-6 (relative) moves its UniPC
// latents by max 4.2e-4 / 1.2e-3 / 2.7e-3 / 5.3e-3 after steps 1-4 (RMS 4.4e-4 / 1.3e-3 / 2.9e-3 /
// 4.4e-3); Euler's and TI2V's by as much (max 4.4e-3 and 4.8e-3 after step 4).
// Measured here (CPU backend, OpenBLAS GEMM), after steps 1-4:
//   unipc       max 4.6e-4 1.1e-3 2.4e-3 5.1e-3, rms 4.4e-4 1.2e-3 2.7e-3 4.4e-3
//   euler       max 4.6e-4 8.9e-4 1.7e-3 4.3e-3, rms 4.4e-4 9.6e-4 1.8e-3 3.9e-3
//   ti2v_unipc  max 4.3e-4 1.2e-3 3.0e-3 4.6e-3, rms 3.4e-4 9.4e-4 2.1e-3 3.8e-3
// — at the floor. The bounds are twice the floor. What they catch: swapping the cond and uncond
// contexts moves step 1 by 3.7e-2 (max); Euler in place of UniPC moves step 2 by 1.7e-2.
constexpr double kMaxErrorBound[] = {1e-3, 2.5e-3, 6e-3, 1.1e-2};  // after step 1, 2, 3, 4
constexpr double kRmsErrorBound[] = {1e-3, 2.5e-3, 6e-3, 1e-2};
// The distilled runs (4 steps, shift 5, no CFG: the conditional pass only). Their floor, measured
// the same way (tools/reference/make_distill_reference.py's loop on noise perturbed by 1e-6,
// relative, two draws, the worse one), after steps 1-4:
//   t2v   max 7.2e-5 2.0e-4 4.0e-4 1.4e-3, rms 7.0e-5 2.0e-4 4.3e-4 1.1e-3
//   ti2v  max 8.0e-5 2.2e-4 4.6e-4 1.2e-3, rms 5.6e-5 1.6e-4 3.7e-4 1.0e-3
// Measured here: t2v max 8.3e-5 2.3e-4 4.1e-4 1.7e-3, rms 7.1e-5 1.9e-4 4.2e-4 1.1e-3; ti2v max
// 7.1e-5 2.4e-4 4.9e-4 1.3e-3, rms 5.5e-5 1.5e-4 3.6e-4 1.0e-3 — at the floor. The bounds are
// about twice the floor. What they catch: timesteps truncated to integers (937 for 937.5, as the
// official UniPC path would) move step 2 by 6.6e-3 (max).
constexpr double kDistilledMaxErrorBound[] = {2e-4, 5e-4, 1e-3, 3e-3};
constexpr double kDistilledRmsErrorBound[] = {2e-4, 5e-4, 1e-3, 2.5e-3};

constexpr int kSteps = 4;
static_assert(std::size(kMaxErrorBound) == kSteps && std::size(kRmsErrorBound) == kSteps);
constexpr double kShift = 5.0;
constexpr float kGuideScale = 5.0f;

const io::TensorFile& reference() {
  static const io::TensorFile file =
      io::TensorFile::open(test::data_path("wan/denoise/trajectories.safetensors"));
  return file;
}

std::vector<float> tensor(const std::string& name) {
  const io::TensorInfo& info = reference().at(name);
  EXPECT_EQ(info.dtype, DType::kF32) << name;
  std::vector<float> out(info.element_count());
  reference().map(info).copy_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

std::int64_t dim(const std::string& name, std::size_t axis) {
  return static_cast<std::int64_t>(reference().at(name).shape.at(axis));
}

io::TensorSet dit_files(const char* config) {
  return io::TensorSet::open(
      test::data_path(std::string("wan/dit/") + config + ".safetensors.index.json"));
}

struct Case {
  const char* name;  // in the reference file
  const char* dit;   // tests/data/wan/dit/<dit>.safetensors.index.json
  wan::SamplerKind sampler;
  bool image;  // TI2V image-to-video: z0 in frame 0
};

constexpr Case kUniPC{"unipc", "t2v", wan::SamplerKind::kUniPC, false};
constexpr Case kEuler{"euler", "t2v", wan::SamplerKind::kEuler, false};
constexpr Case kTi2vUniPC{"ti2v_unipc", "ti2v", wan::SamplerKind::kUniPC, true};
// The step-distilled recipe (make_distill_reference.py: LightX2V's scheduler, shift 5, no CFG),
// its latents in tests/data/wan/distill/trajectories.safetensors.
constexpr Case kDistilled{"t2v", "t2v", wan::SamplerKind::kDistilled, false};
constexpr Case kTi2vDistilled{"ti2v", "ti2v", wan::SamplerKind::kDistilled, true};

bool distilled(const Case& c) {
  return c.sampler == wan::SamplerKind::kDistilled;
}

const io::TensorFile& distill_reference() {
  static const io::TensorFile file =
      io::TensorFile::open(test::data_path("wan/distill/trajectories.safetensors"));
  return file;
}

// The latent the reference has after `step` (1-based) of case `c`.
std::vector<float> reference_step(const Case& c, int step) {
  const std::string name = std::string(c.name) + ".step" + std::to_string(step);
  if (!distilled(c)) return tensor(name);
  const io::TensorInfo& info = distill_reference().at(name);
  std::vector<float> out(info.element_count());
  distill_reference().map(info).copy_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

wan::LatentGrid grid_of(const Case& c) {
  const std::string noise = std::string(c.dit) + ".noise";
  return {static_cast<int>(dim(noise, 0)), static_cast<int>(dim(noise, 1)),
          static_cast<int>(dim(noise, 2)), static_cast<int>(dim(noise, 3))};
}

// Where the DiT's blocks live for a run.
enum class Placing {
  kResident,  // every block on the device
  kStreamed,  // offload::streamed_plan: every block from disk each step, 64 KiB staging slots
  kMixed,     // block 0 in pinned RAM, block 1 from disk
};

Plan plan_for(const offload::ModelLayout& layout, Placing placing, ReadMethod method) {
  offload::Preset preset;
  preset.look_ahead = 1;
  preset.staging_slots = 3;
  preset.staging_slot_bytes = 64 << 10;  // far smaller than a block: each streams in chunks
  preset.read_method = method;
  Plan plan = offload::streamed_plan(layout, preset);
  if (placing == Placing::kResident) {
    std::fill(plan.placement.begin(), plan.placement.end(), Placement::kDevice);
    plan.device_slots = plan.staging_slots = 0;
    plan.device_slot_bytes = plan.staging_slot_bytes = 0;
  } else if (placing == Placing::kMixed) {
    plan.placement[1] = Placement::kPinnedCache;  // [0] is the embeddings, [1] block 0
  }
  return plan;
}

// A device tensor with its own memory, holding `values` as `dtype`.
using Owned = test::OwnedTensor;
using test::compare;
using test::Deviation;
using test::same_bits;

// The latent after every step of Ferry's loop, from the reference's noise, contexts and z0. The
// distilled cases run without guidance: the conditional context only, an arena for one branch
// (a second pass would not fit it), and one DiT evaluation per step.
std::vector<std::vector<float>> run(const Case& c, Placing placing = Placing::kResident,
                                    ReadMethod method = ReadMethod::kDirect) {
  Backend& backend = test::model_backend();
  const io::TensorSet set = dit_files(c.dit);
  const offload::ModelLayout layout = wan::dit_model_layout(set, 1, 1, 1, 0);
  wan::WanDit dit(backend, set, layout);
  offload::StreamerOptions options;
  options.passes = kSteps;
  offload::WeightStreamer streamer(backend, layout, plan_for(layout, placing, method), options);

  const wan::LatentGrid grid = grid_of(c);
  const std::int64_t branches = distilled(c) ? 1 : 2;
  const std::uint64_t arena_bytes = wan::dit_activation_bytes(
      dit.config(), static_cast<std::int64_t>(grid.tokens()), 0, branches, c.image ? 2 : 1);
  if (branches == 1) {  // too small for a CFG pair
    EXPECT_LT(arena_bytes,
              wan::dit_activation_bytes(dit.config(), static_cast<std::int64_t>(grid.tokens()), 0,
                                        2, c.image ? 2 : 1));
  }
  const auto arena_memory = backend.allocate(arena_bytes);
  memory::Arena arena(arena_memory->data(), arena_bytes, backend.device());

  const Owned cond(backend, DType::kBF16, Shape{dim("context.cond", 0), dim("context.cond", 1)},
                   tensor("context.cond").data());
  const Owned uncond(backend, DType::kBF16,
                     Shape{dim("context.uncond", 0), dim("context.uncond", 1)},
                     tensor("context.uncond").data());
  const Tensor contexts[2] = {cond.tensor, uncond.tensor};

  std::vector<float> latent = tensor(std::string(c.dit) + ".noise");
  std::vector<float> z0;
  if (c.image) {
    z0 = tensor("z0");
    wan::ti2v_insert_frame0(grid, z0, latent);  // the official blend before the loop
  }
  DenoiseSettings settings;
  settings.steps = kSteps;
  settings.shift = kShift;
  settings.sampler = c.sampler;
  settings.guide_scale = distilled(c) ? wan::kDistilledGuideScale : kGuideScale;
  std::vector<std::vector<float>> steps;
  DenoiseHooks hooks;
  hooks.after_step = [&](int, std::span<const float>) { steps.push_back(latent); };
  const int evaluations = denoise(backend, dit, streamer, arena,
                                  std::span(contexts, static_cast<std::size_t>(branches)), grid, z0,
                                  settings, latent, hooks);
  EXPECT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(evaluations, kSteps * branches);
  EXPECT_EQ(arena.used(), 0u);
  // Streamed plans really stream: both blocks cross once per step (the CFG pair shares them).
  const offload::StreamStats stats = streamer.stats();
  const std::uint64_t blocks = dit.config().layers;
  EXPECT_EQ(stats.groups_uploaded, placing == Placing::kResident ? 0 : kSteps * blocks);
  EXPECT_EQ(stats.bytes_read > 0, placing != Placing::kResident);
  return steps;
}

class WanDenoise : public test::ModelTest {};

void expect_matches_reference(const Case& c) {
  const std::vector<std::vector<float>> got = run(c);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kSteps));
  const double* max_bound = distilled(c) ? kDistilledMaxErrorBound : kMaxErrorBound;
  const double* rms_bound = distilled(c) ? kDistilledRmsErrorBound : kRmsErrorBound;
  for (int k = 1; k <= kSteps; ++k) {
    const std::vector<float> want = reference_step(c, k);
    ASSERT_EQ(got[k - 1].size(), want.size());
    const Deviation err = compare(got[k - 1], want);
    EXPECT_LT(err.max_rel, max_bound[k - 1]) << c.name << ", step " << k;
    EXPECT_LT(err.rms_rel, rms_bound[k - 1]) << c.name << ", step " << k;
    EXPECT_TRUE(std::isfinite(err.max_rel) && std::isfinite(err.rms_rel));
    std::printf("  [%s step %d] max error %.2e of max|x|, rms error %.2e of rms(x)\n", c.name, k,
                err.max_rel, err.rms_rel);
  }
}

TEST_F(WanDenoise, schedule_is_the_official_one) {
  const wan::Sampler sampler(kSteps, kShift, wan::SamplerKind::kUniPC, 1);
  const std::vector<float> sigmas = tensor("sigmas");
  const std::vector<float> timesteps = tensor("timesteps");
  ASSERT_EQ(sampler.sigmas().size(), sigmas.size());
  ASSERT_EQ(sampler.timesteps().size(), timesteps.size());
  EXPECT_EQ(std::memcmp(sampler.sigmas().data(), sigmas.data(), sigmas.size() * sizeof(float)), 0);
  for (std::size_t i = 0; i < timesteps.size(); ++i) {
    EXPECT_EQ(static_cast<float>(sampler.timesteps()[i]), timesteps[i]) << "step " << i;
  }
  EXPECT_EQ(sampler.timesteps().front(), 999);
}

TEST_F(WanDenoise, t2v_unipc_with_cfg_follows_the_official_trajectory) {
  expect_matches_reference(kUniPC);
}

TEST_F(WanDenoise, t2v_euler_with_cfg_follows_the_official_trajectory) {
  expect_matches_reference(kEuler);
}

TEST_F(WanDenoise, ti2v_image_to_video_follows_the_official_trajectory) {
  expect_matches_reference(kTi2vUniPC);
}

TEST_F(WanDenoise, t2v_distilled_without_cfg_follows_the_lightx2v_trajectory) {
  expect_matches_reference(kDistilled);
}

TEST_F(WanDenoise, ti2v_image_to_video_distilled_follows_the_lightx2v_trajectory) {
  expect_matches_reference(kTi2vDistilled);
}

TEST_F(WanDenoise, ti2v_frame0_is_the_image_latent_after_every_step) {
  const wan::LatentGrid grid = grid_of(kTi2vUniPC);
  const std::vector<float> z0 = tensor("z0");
  const std::size_t frame = static_cast<std::size_t>(grid.height) * grid.width;
  const std::size_t video = frame * static_cast<std::size_t>(grid.frames);
  const std::vector<std::vector<float>> steps = run(kTi2vUniPC);
  for (std::size_t k = 0; k < steps.size(); ++k) {
    for (std::size_t ch = 0; ch < static_cast<std::size_t>(grid.channels); ++ch) {
      EXPECT_EQ(
          std::memcmp(steps[k].data() + ch * video, z0.data() + ch * frame, frame * sizeof(float)),
          0)
          << "step " << k + 1 << ", channel " << ch;
    }
    // The other frames moved.
    const std::vector<float> noise = tensor("ti2v.noise");
    EXPECT_NE(steps[k][frame], noise[frame]);
  }
}

TEST_F(WanDenoise, streamed_and_mixed_plans_give_the_resident_latents) {
  struct Variant {
    Placing placing;
    ReadMethod method;
    const char* name;
  };
  const Variant variants[] = {{Placing::kStreamed, ReadMethod::kDirect, "streamed, direct"},
                              {Placing::kStreamed, ReadMethod::kMapped, "streamed, mapped"},
                              {Placing::kMixed, ReadMethod::kDirect, "mixed, direct"}};
  for (const Case& c : {kUniPC, kTi2vUniPC, kDistilled}) {
    const std::vector<std::vector<float>> resident = run(c);
    for (const Variant& v : variants) {
      const std::vector<std::vector<float>> streamed = run(c, v.placing, v.method);
      ASSERT_EQ(streamed.size(), resident.size());
      for (std::size_t k = 0; k < resident.size(); ++k) {
        EXPECT_TRUE(same_bits(streamed[k], resident[k]))
            << c.name << ", step " << k + 1 << ", " << v.name;
      }
    }
  }
}

}  // namespace
}  // namespace ferry::models::wan

namespace ferry::models::wan {
namespace {

// The expert split (formats_lora_moe.md §6.2, §5.3): the official rule t >= boundary·1000 on the
// sampler's own timesteps, at the official A14B settings and the distilled 4-step recipe.
TEST(WanExperts, eachExpertRunsTheStepsTheOfficialBoundaryGivesIt) {
  struct Split {
    int steps;
    double shift, boundary;
    SamplerKind sampler;
    int high;
  } cases[] = {
      {40, 12.0, 0.875, SamplerKind::kUniPC, 26},   // T2V: steps 0–25 high (t 877, then 865)
      {40, 5.0, 0.900, SamplerKind::kUniPC, 15},    // I2V: steps 0–14 high (902, then 892)
      {40, 3.0, 0.900, SamplerKind::kUniPC, 10},    // I2V at 480p's shift 3
      {4, 5.0, 0.875, SamplerKind::kDistilled, 2},  // Lightning / LightX2V: 2 + 2
      {4, 5.0, 0.900, SamplerKind::kDistilled, 2},
      {4, 5.0, 0.0, SamplerKind::kUniPC, 4},  // one expert
  };
  for (const Split& c : cases) {
    DenoiseSettings s;
    s.steps = c.steps;
    s.shift = c.shift;
    s.boundary = c.boundary;
    s.sampler = c.sampler;
    const std::array<int, 2> split = expert_steps(s);
    EXPECT_EQ(split[0], c.high) << c.steps << " steps, shift " << c.shift;
    EXPECT_EQ(split[1], c.steps - c.high) << c.steps << " steps, shift " << c.shift;
  }
}

// CFG is on when any expert's steps use it: the unconditional context is needed then.
TEST(WanExperts, guidanceIsNeededWhenEitherExpertUsesIt) {
  DenoiseSettings s;
  s.steps = 4;
  s.boundary = 0.875;
  s.sampler = SamplerKind::kDistilled;
  s.guide_scale = s.low_noise_guide_scale = 1.0f;
  EXPECT_FALSE(any_guidance(s));
  s.guide_scale = 3.5f;  // "first steps with CFG" recipes
  EXPECT_TRUE(any_guidance(s));
  s.guide_scale = 1.0f;
  s.low_noise_guide_scale = 2.0f;
  EXPECT_TRUE(any_guidance(s));
  s.boundary = 0.0;  // one expert: only guide_scale counts
  EXPECT_FALSE(any_guidance(s));
}

}  // namespace
}  // namespace ferry::models::wan
