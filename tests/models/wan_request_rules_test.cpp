// Filling and checking a Wan generation request (core/models/wan/request_rules.h), and the rules
// the engine publishes to front ends; the checks every family shares (core/models/request.h).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/media/video_writer.h"
#include "core/models/wan/request_rules.h"
#include "tests/test_support.h"

namespace ferry::models::wan {
namespace {

ModelSet model(const DitConfig& c) {
  ModelSet m;
  m.dit_config = c;
  m.text_dim = 4096;
  return m;
}

GenerationRequest request(const test::ScratchDir& dir) {
  GenerationRequest r;
  r.prompt = "a ferry crossing a fjord at dawn";
  r.output = dir / ("out" + std::string(media::video_extension()));
  return r;
}

// The official best_output_size (wan/utils/utils.py, W22), run on these inputs with 32-pixel
// steps and the 704·1280 area.
TEST(Request, BestOutputSizeMatchesTheOfficialFunction) {
  struct Case {
    int iw, ih, w, h;
  } cases[] = {{1920, 1080, 1248, 704}, {1080, 1920, 704, 1248}, {1000, 1000, 960, 928},
               {640, 480, 1088, 800},   {96, 64, 1152, 768},     {4000, 1000, 1888, 448}};
  for (const Case& c : cases) {
    int w = 0, h = 0;
    best_output_size(c.iw, c.ih, 704 * 1280, w, h);
    EXPECT_EQ(w, c.w) << c.iw << "x" << c.ih;
    EXPECT_EQ(h, c.h) << c.iw << "x" << c.ih;
  }
}

TEST(Request, FillsTheModelsOfficialDefaults) {
  test::ScratchDir dir;
  const ResolvedRequest ti2v = resolve(request(dir), model(kTI2V_5B), std::nullopt);
  EXPECT_EQ(ti2v.width, 1280);
  EXPECT_EQ(ti2v.height, 704);
  EXPECT_EQ(ti2v.frames, 121);
  EXPECT_EQ(ti2v.fps, 24);
  EXPECT_EQ(ti2v.steps, 50);
  EXPECT_FLOAT_EQ(ti2v.guide_scale, 5.0f);
  EXPECT_DOUBLE_EQ(ti2v.shift, 5.0);
  EXPECT_EQ(ti2v.negative_prompt, kWanDefaultNegativePrompt);
  EXPECT_EQ(ti2v.latent_frames, 31);
  EXPECT_EQ(ti2v.latent_height, 44);
  EXPECT_EQ(ti2v.latent_width, 80);

  const ResolvedRequest t2v = resolve(request(dir), model(kT2V_1_3B), std::nullopt);
  EXPECT_EQ(t2v.width, 832);
  EXPECT_EQ(t2v.height, 480);
  EXPECT_EQ(t2v.frames, 81);
  EXPECT_EQ(t2v.fps, 16);
  EXPECT_EQ(t2v.latent_height, 60);
  EXPECT_EQ(t2v.latent_width, 104);
}

TEST(Request, AStartImageSetsTheAspectAndTheSizeSetsTheArea) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.image = dir / "start.png";
  const ResolvedRequest out = resolve(r, model(kTI2V_5B), std::pair(1920, 1080));
  EXPECT_EQ(out.width, 1248);
  EXPECT_EQ(out.height, 704);
}

TEST(Request, KeepsWhatTheUserChose) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.width = 832;
  r.height = 480;
  r.frames = 33;
  r.steps = 20;
  r.guide_scale = 6.0f;
  r.shift = 8.0;
  r.sampler = "euler";
  r.negative_prompt = "blurry";
  const ResolvedRequest out = resolve(r, model(kTI2V_5B), std::nullopt);
  EXPECT_EQ(out.width, 832);
  EXPECT_EQ(out.frames, 33);
  EXPECT_EQ(out.steps, 20);
  EXPECT_FLOAT_EQ(out.guide_scale, 6.0f);
  EXPECT_DOUBLE_EQ(out.shift, 8.0);
  EXPECT_EQ(out.sampler, "euler");
  EXPECT_EQ(out.negative_prompt, "blurry");
}

TEST(Request, RefusesWhatCannotBeGenerated) {
  test::ScratchDir dir;
  const ModelSet ti2v = model(kTI2V_5B);
  const auto code = [&](auto change) {
    GenerationRequest r = request(dir);
    change(r);
    return test::error_code_of([&] {
      check_run_inputs(r);
      resolve(r, ti2v, std::nullopt);
    });
  };
  EXPECT_EQ(code([](GenerationRequest& r) { r.prompt = "  "; }), ErrorCode::kBadArgument);
  EXPECT_EQ(code([](GenerationRequest& r) { r.width = 1000, r.height = 704; }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(code([](GenerationRequest& r) { r.frames = 80; }), ErrorCode::kBadArgument);
  EXPECT_EQ(code([](GenerationRequest& r) { r.steps = -1; }), ErrorCode::kBadArgument);
  EXPECT_EQ(code([](GenerationRequest& r) { r.guide_scale = 80.0f; }), ErrorCode::kBadArgument);
  EXPECT_EQ(code([](GenerationRequest& r) { r.shift = 0.0; }), ErrorCode::kBadArgument);
  EXPECT_EQ(code([](GenerationRequest& r) { r.sampler = "ddim"; }), ErrorCode::kBadArgument);
  EXPECT_EQ(code([&](GenerationRequest& r) { r.output = dir / "out.mkv"; }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(code([&](GenerationRequest& r) {
              r.output = dir / "missing" / ("out" + std::string(media::video_extension()));
            }),
            ErrorCode::kBadArgument);
  // A start image needs the image-to-video model.
  GenerationRequest r = request(dir);
  r.image = dir / "start.png";
  EXPECT_EQ(test::error_code_of([&] { resolve(r, model(kT2V_1_3B), std::pair(640, 480)); }),
            ErrorCode::kBadArgument);
}

// The size rule is the model's: Wan 2.1 takes multiples of 16 (400x240 is not a multiple of 32),
// TI2V-5B multiples of 32; front ends read it from the rules instead of restating it.
TEST(Request, TheSizeRuleIsTheModelsAndIsPublished) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.width = 400;
  r.height = 240;
  const ResolvedRequest t2v = resolve(r, model(kT2V_1_3B), std::nullopt);
  EXPECT_EQ(t2v.width, 400);
  EXPECT_EQ(t2v.height, 240);
  EXPECT_EQ(request_rules(model(kT2V_1_3B)).size_multiple, 16);
  EXPECT_TRUE(request_rules(model(kT2V_1_3B)).size_allowed(400, 240));
  EXPECT_EQ(test::error_code_of([&] { resolve(r, model(kTI2V_5B), std::nullopt); }),
            ErrorCode::kBadArgument);
  const RequestRules ti2v = request_rules(model(kTI2V_5B));
  EXPECT_EQ(ti2v.size_multiple, 32);
  EXPECT_FALSE(ti2v.size_allowed(400, 240));
  EXPECT_TRUE(ti2v.takes_start_image);
  EXPECT_EQ(ti2v.samplers, (std::vector<std::string>{"unipc", "euler", "distill4"}));
  // Its own defaults, published so that the app switches to them when it is picked.
  ASSERT_EQ(ti2v.sampler_defaults.size(), 1u);
  EXPECT_EQ(ti2v.sampler_defaults[0].sampler, "distill4");
  EXPECT_EQ(ti2v.sampler_defaults[0].steps, 4);
  EXPECT_EQ(ti2v.sampler_defaults[0].guide_scale, 1.0f);
  EXPECT_EQ(ti2v.sampler_defaults[0].shift, 5.0);
  for (const auto& [w, h] : ti2v.sizes) EXPECT_TRUE(ti2v.size_allowed(w, h)) << w << "x" << h;
  EXPECT_EQ(std::pair(ti2v.width, ti2v.height), std::pair(1280, 704));
}

// The step-distilled recipe (formats_lora_moe.md §5): 4 steps, shift 5, no CFG unless asked.
TEST(Request, TheDistilledSamplerTakesItsRecipesDefaults) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.sampler = "distill4";
  for (const DitConfig* c : {&kTI2V_5B, &kT2V_1_3B}) {
    const ResolvedRequest out = resolve(r, model(*c), std::nullopt);
    EXPECT_EQ(out.sampler, "distill4");
    EXPECT_EQ(out.steps, 4);
    EXPECT_DOUBLE_EQ(out.shift, 5.0);
    EXPECT_EQ(out.guide_scale, 1.0f);
    EXPECT_TRUE(out.warnings.empty()) << out.warnings.front();
  }
  r.steps = 8;
  r.shift = 8.0;
  const ResolvedRequest eight = resolve(r, model(kTI2V_5B), std::nullopt);
  EXPECT_EQ(eight.steps, 8);
  EXPECT_DOUBLE_EQ(eight.shift, 8.0);
  EXPECT_TRUE(eight.warnings.empty());
}

TEST(Request, OtherSamplersKeepTheModelsDefaultsAndWarnOfNothing) {
  test::ScratchDir dir;
  for (const char* sampler : {"unipc", "euler"}) {
    GenerationRequest r = request(dir);
    r.sampler = sampler;
    const ResolvedRequest out = resolve(r, model(kT2V_14B), std::nullopt);
    EXPECT_EQ(out.steps, 50) << sampler;
    EXPECT_FLOAT_EQ(out.guide_scale, 5.0f) << sampler;
    EXPECT_DOUBLE_EQ(out.shift, 5.0) << sampler;
    EXPECT_TRUE(out.warnings.empty()) << sampler;
  }
  // A LoRA that is not a distillation LoRA changes nothing either.
  GenerationRequest r = request(dir);
  r.loras = {{dir / "watercolor_style_rank16.safetensors", 0.8f}};
  EXPECT_TRUE(resolve(r, model(kT2V_14B), std::nullopt).warnings.empty());
}

TEST(Request, CfgWithTheDistilledSamplerIsAWarningNotARefusal) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.sampler = "distill4";
  r.guide_scale = 5.0f;
  const ResolvedRequest out = resolve(r, model(kTI2V_5B), std::nullopt);
  EXPECT_FLOAT_EQ(out.guide_scale, 5.0f);
  ASSERT_EQ(out.warnings.size(), 1u);
  EXPECT_NE(out.warnings[0].find("doubles each step's cost and usually burns the image"),
            std::string::npos)
      << out.warnings[0];
  r.guide_scale = 1.0000005f;  // within Lightning's 1e-6 of 1: no guidance
  EXPECT_TRUE(resolve(r, model(kTI2V_5B), std::nullopt).warnings.empty());
}

TEST(Request, ADistillationLoraRunAnyOtherWayIsAWarning) {
  test::ScratchDir dir;
  const std::string name = "wan2.2_t2v_A14b_high_noise_lora_rank64_lightx2v_4step_1217.safetensors";
  const auto warnings = [&](const char* sampler, int steps, std::optional<float> guide) {
    GenerationRequest r = request(dir);
    r.loras = {{dir / "loras" / name, 1.0f}};
    if (sampler != nullptr) r.sampler = sampler;
    r.steps = steps;
    r.guide_scale = guide;
    return resolve(r, model(kT2V_14B), std::nullopt).warnings;
  };
  // The model's own sampler, 50 steps, CFG 5: one warning naming the file, never a refusal.
  const std::vector<std::string> official = warnings(nullptr, 0, std::nullopt);
  ASSERT_EQ(official.size(), 1u);
  EXPECT_EQ(official[0].find(name), 0u) << official[0];
  EXPECT_NE(official[0].find("unipc sampler, 50 steps, guide scale 5"), std::string::npos)
      << official[0];
  EXPECT_EQ(warnings("euler", 4, 1.0f).size(), 1u);              // not the distilled sampler
  EXPECT_EQ(warnings("distill4", 12, std::nullopt).size(), 1u);  // more than 8 steps
  EXPECT_EQ(warnings("distill4", 0, 3.5f).size(), 2u);           // CFG: (a) and the LoRA's
  EXPECT_TRUE(warnings("distill4", 0, std::nullopt).empty());
  EXPECT_TRUE(warnings("distill4", 8, 1.0f).empty());
}

}  // namespace
}  // namespace ferry::models::wan
