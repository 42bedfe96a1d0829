// The Turbo recipe of H3 (minimax_h3.md §D.2–D.3; core/models/h3/family.cpp): the distill4
// sampler's defaults (4 forwards, video shift 6, audio shift 3, no CFG) and their schedules
// against DiffSynth's worked example; a Turbo LoRA told by its name and run another way warned
// about with the advice; LoRAs on the demo set checked at resolve (what adapts nothing is a
// warning, a LoRA for another model a refusal) and counted in the DiT's plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/io/safetensors_writer.h"
#include "core/models/family.h"
#include "core/models/h3/demo_model.h"
#include "core/models/h3/run.h"
#include "core/models/h3/scheduler.h"
#include "core/models/h3/synthetic_set.h"
#include "core/offload/preset.h"
#include "core/tensor/convert.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

namespace fs = std::filesystem;

// minimax_h3.md §D.2's example (DiffSynth's N = 4 steps): its σ before each of the 4 forwards,
// then 0. Ferry counts forwards too: a schedule of N + 1 grid points.
TEST(H3Turbo, FourStepSchedulesAreDiffSynthsExample) {
  const H3Schedule video = h3_schedule(4 + 1, 6.0f);
  const H3Schedule audio = h3_schedule(4 + 1, kAudioShift);
  const std::vector<float> want_video = {1.0f, 0.947368f, 0.857143f, 0.666667f, 0.0f};
  const std::vector<float> want_audio = {1.0f, 0.9f, 0.75f, 0.5f, 0.0f};
  ASSERT_EQ(video.sigmas.size(), want_video.size());
  ASSERT_EQ(audio.sigmas.size(), want_audio.size());
  EXPECT_EQ(video.steps(), 4u);
  EXPECT_EQ(audio.steps(), 4u);
  for (std::size_t i = 0; i < want_video.size(); ++i) {
    // The example's 6 digits; f32 holds them to about 1e-7.
    EXPECT_NEAR(video.sigmas[i], want_video[i], 5e-7) << i;
    EXPECT_NEAR(audio.sigmas[i], want_audio[i], 5e-7) << i;
  }
  EXPECT_EQ(video.sigmas.back(), 0.0f);
  EXPECT_FLOAT_EQ(video.timesteps[1], 1.0f - video.sigmas[1]);
}

const fs::path& demo_folder() {
  static const test::ScratchDir dir;
  static const fs::path folder = [] {
    const fs::path f = dir / "h3-demo";
    write_h3_demo_model(f);
    return f;
  }();
  return folder;
}

// A rank-4 LoRA in lightx2v's naming (diffusion_model. prefix, lora_down/lora_up, alpha 4) on
// every block Linear of a DiT of these shapes, plus `extra` modules of [hidden, hidden]; bf16
// values of about 0.05.
void write_lora(const fs::path& path, const SyntheticShapes& s,
                const std::vector<std::string>& extra = {}) {
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::uint64_t h = u(s.dit_hidden), inner = u(s.dit_heads * 128), f = u(s.dit_ffn);
  const std::uint64_t rank = 4;
  std::vector<std::pair<std::string, std::pair<std::uint64_t, std::uint64_t>>> modules;
  for (std::int64_t i = 0; i < s.dit_layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    modules.push_back({p + "attn.qkv_proj", {3 * inner, h}});
    modules.push_back({p + "attn.out_proj", {h, inner}});
    modules.push_back({p + "mlp.fc1", {2 * f, h}});
    modules.push_back({p + "mlp.fc2", {h, f}});
  }
  for (const std::string& m : extra) modules.push_back({m, {h, h}});
  std::vector<io::TensorSpec> specs;
  for (const auto& [module, shape] : modules) {
    const std::string key = "diffusion_model." + module;
    specs.push_back({key + ".lora_down.weight", DType::kBF16, {rank, shape.second}});
    specs.push_back({key + ".lora_up.weight", DType::kBF16, {shape.first, rank}});
    specs.push_back({key + ".alpha", DType::kF32, {}});
  }
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<std::vector<std::byte>> data;
  for (const io::TensorSpec& spec : specs) {
    std::vector<float> values(spec.bytes() / dtype_size(spec.dtype));
    for (float& v : values) v = spec.dtype == DType::kF32 ? 4.0f : normal(rng);
    std::vector<std::byte> bytes(spec.bytes());
    convert_from_f32(values.data(), spec.dtype, bytes.data(), values.size());
    data.push_back(std::move(bytes));
  }
  io::write_safetensors(
      path, specs, {}, [&](std::size_t i, std::uint64_t offset, std::span<std::byte> out) {
        std::copy_n(data[i].begin() + static_cast<std::ptrdiff_t>(offset), out.size(), out.begin());
      });
}

struct Demo {
  std::unique_ptr<ModelParts> parts = find_family("h3")->open({demo_folder()});
};

GenerationRequest request_with(std::vector<LoraChoice> loras) {
  GenerationRequest r;
  r.model = {demo_folder()};
  r.prompt = "a ferry horn";
  r.loras = std::move(loras);
  return r;
}

bool mentions(const std::vector<std::string>& warnings, const std::string& text) {
  return std::any_of(warnings.begin(), warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

TEST(H3Turbo, TheDistillSamplerBringsTheTurboRecipe) {
  const Demo demo;
  const RequestRules rules = demo.parts->rules();
  EXPECT_NE(std::find(rules.samplers.begin(), rules.samplers.end(), "distill4"),
            rules.samplers.end());
  ASSERT_EQ(rules.sampler_defaults.size(), 1u);
  EXPECT_EQ(rules.sampler_defaults[0].sampler, "distill4");
  EXPECT_EQ(rules.sampler_defaults[0].steps, 4);
  EXPECT_EQ(rules.sampler_defaults[0].guide_scale, 1.0f);
  EXPECT_EQ(rules.sampler_defaults[0].shift, 6.0);
  GenerationRequest request = request_with({});
  request.sampler = "distill4";
  const ResolvedRequest r = demo.parts->resolve(request, std::nullopt);
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.shift, 6.0);
  EXPECT_EQ(r.guide_scale, 1.0f);
  // What the user gives still wins.
  request.steps = 8;
  request.shift = 5.0;
  const ResolvedRequest own = demo.parts->resolve(request, std::nullopt);
  EXPECT_EQ(own.steps, 8);
  EXPECT_EQ(own.shift, 5.0);
}

TEST(H3Turbo, ATurboLoraRunAnotherWayIsWarnedAbout) {
  test::ScratchDir dir;
  const fs::path turbo = dir / "minimax_h3_fl2v_turbo_4step_v1.0_768p_bf16.safetensors";
  write_lora(turbo, H3DemoModel::shapes());
  const Demo demo;
  EXPECT_EQ(demo.parts->check_lora(turbo).distilled_steps, 4);
  GenerationRequest request = request_with({{turbo, 1.0f}});
  request.sampler = "euler";
  request.steps = 20;
  const ResolvedRequest slow = demo.parts->resolve(request, std::nullopt);
  EXPECT_TRUE(mentions(slow.warnings,
                       "is a Turbo (step-distillation) LoRA (4 steps) but this run "
                       "asks for the euler sampler, 20 steps, shift 12: choose the "
                       "distill4 sampler with 4 steps and shift 6"))
      << (slow.warnings.empty() ? "no warning" : slow.warnings[0]);
  request.sampler = "distill4";
  request.steps = 0;
  const ResolvedRequest fast = demo.parts->resolve(request, std::nullopt);
  EXPECT_TRUE(fast.warnings.empty()) << fast.warnings[0];
}

TEST(H3Turbo, LorasAreCheckedAtResolveAndPlanned) {
  test::ScratchDir dir;
  const SyntheticShapes shapes = H3DemoModel::shapes();
  const fs::path style = dir / "style.safetensors";
  write_lora(style, shapes, {"blocks.9.attn.out_proj", "text_encoder.layers.0.q_proj"});
  const Demo demo;
  const ResolvedRequest r = demo.parts->resolve(request_with({{style, 0.8f}}), std::nullopt);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].rfind("LoRA style.safetensors: 8 of 10 layers; 2 adapt nothing", 0), 0u)
      << r.warnings[0];
  // The plan's DiT stage counts the LoRA's bytes with its blocks.
  const offload::MachineInfo machine{false, 0, 0, 16ull << 30, 12ull << 30};
  const offload::Preset preset = offload::find_preset(offload::builtin_presets(), "cpu", machine);
  const GenerationPlan with = demo.parts->plan(r, preset, machine, true);
  const GenerationPlan without =
      demo.parts->plan(demo.parts->resolve(request_with({}), std::nullopt), preset, machine, true);
  const auto dit_stage = [](const GenerationPlan& g) {
    for (const StagePlan& s : g.stages) {
      if (s.stage == kDitStage) return s;
    }
    return StagePlan{};
  };
  EXPECT_GT(dit_stage(with).weight_bytes, dit_stage(without).weight_bytes);
  EXPECT_NE(dit_stage(with).detail.find("LoRA style.safetensors"), std::string::npos);

  // A LoRA for a wider DiT: refused before any work, naming the layer.
  SyntheticShapes wide = shapes;
  wide.dit_hidden *= 2;
  const fs::path other = dir / "other.safetensors";
  write_lora(other, wide);
  try {
    demo.parts->resolve(request_with({{other, 1.0f}}), std::nullopt);
    FAIL() << "a LoRA for another model was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadModelFile);
    EXPECT_NE(std::string(e.what()).find("blocks.0.attn.qkv_proj"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ferry::models::h3
