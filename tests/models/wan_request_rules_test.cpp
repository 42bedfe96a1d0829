// Filling and checking a Wan generation request (core/models/wan/request_rules.h), and the rules
// the engine publishes to front ends; the checks every family shares (core/models/request.h).
#include <gtest/gtest.h>

#include <functional>
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

// Wan 2.2 A14B: two experts (their paths are never read by the rules).
ModelSet a14b(const DitConfig& c) {
  ModelSet m = model(c);
  m.dit = "high_noise_model/diffusion_pytorch_model.safetensors";
  m.low_noise_dit = "low_noise_model/diffusion_pytorch_model.safetensors";
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

// --wav: a .wav file in a folder that exists, not the video itself (check_run_inputs), and only
// for a model that makes sound: Wan's videos are silent (check_request).
TEST(Request, AWavExportIsAWavFileBesideTheVideoOfAModelWithSound) {
  test::ScratchDir dir;
  const auto inputs = [&](const std::filesystem::path& wav) {
    GenerationRequest r = request(dir);
    r.soundtrack_wav = wav;
    try {
      check_run_inputs(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(inputs(dir / "sound.wav"), "");
  EXPECT_NE(inputs(dir / "sound.mp3").find(".wav file"), std::string::npos);
  EXPECT_NE(inputs(dir / "missing" / "sound.wav").find("does not exist"), std::string::npos);
  GenerationRequest same = request(dir);
  same.output = dir / "clip.wav";
  same.soundtrack_wav = same.output;
  EXPECT_EQ(test::error_code_of([&] { check_run_inputs(same); }), ErrorCode::kBadArgument);

  GenerationRequest silent = request(dir);
  silent.soundtrack_wav = dir / "sound.wav";
  try {
    resolve(silent, model(kTI2V_5B), std::nullopt);
    ADD_FAILURE() << "a WAV export of a silent model was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
    EXPECT_NE(std::string(e.what()).find("silent"), std::string::npos) << e.what();
  }
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

namespace ferry::models::wan {
namespace {

// image2video.py's rule, on inputs whose results were computed with the official expression
// (np.sqrt(max_area * aspect) // 8 // 2 * 2 · 8): the 1280·720 area at 16:9, 4:3, 9:16, and the
// parity test's 72×54 image at a 64·64 area.
TEST(A14bRequest, OutputSizeFollowsTheOfficialI2vRule) {
  struct Case {
    int iw, ih;
    std::int64_t area;
    int w, h;
  } cases[] = {{1920, 1080, 1280 * 720, 1280, 720},
               {1024, 768, 1280 * 720, 1104, 816},
               {1080, 1920, 1280 * 720, 720, 1280},
               {72, 54, 64 * 64, 64, 48},
               // sqrt(832·480·480/832) is 479.99999…: the official rule gives 464, not 480.
               {832, 480, 832 * 480, 832, 464}};
  for (const Case& c : cases) {
    int w = 0, h = 0;
    a14b_output_size(c.iw, c.ih, c.area, w, h);
    EXPECT_EQ(w, c.w) << c.iw << "x" << c.ih;
    EXPECT_EQ(h, c.h) << c.iw << "x" << c.ih;
  }
}

TEST(A14bRequest, FillsEachExpertsOfficialDefaults) {
  test::ScratchDir dir;
  const ResolvedRequest t2v = resolve(request(dir), a14b(kT2V_A14B), std::nullopt);
  EXPECT_EQ(t2v.width, 1280);
  EXPECT_EQ(t2v.height, 720);
  EXPECT_EQ(t2v.frames, 81);
  EXPECT_EQ(t2v.fps, 16);
  EXPECT_EQ(t2v.steps, 40);
  EXPECT_DOUBLE_EQ(t2v.shift, 12.0);
  EXPECT_FLOAT_EQ(t2v.guide_scale, 4.0f);  // high-noise
  EXPECT_FLOAT_EQ(t2v.low_noise_guide_scale, 3.0f);
  const RequestRules rules = request_rules(a14b(kT2V_A14B));
  EXPECT_TRUE(rules.two_experts);
  EXPECT_DOUBLE_EQ(rules.expert_boundary, 0.875);
  EXPECT_FALSE(rules.takes_start_image);

  GenerationRequest with_image = request(dir);
  with_image.image = dir / "start.png";
  const ResolvedRequest i2v = resolve(with_image, a14b(kI2V_A14B), std::pair(1920, 1080));
  EXPECT_EQ(i2v.width, 1280);
  EXPECT_EQ(i2v.height, 720);
  EXPECT_DOUBLE_EQ(i2v.shift, 5.0);
  EXPECT_FLOAT_EQ(i2v.guide_scale, 3.5f);
  EXPECT_FLOAT_EQ(i2v.low_noise_guide_scale, 3.5f);
  const RequestRules i2v_rules = request_rules(a14b(kI2V_A14B));
  EXPECT_TRUE(i2v_rules.takes_start_image);
  EXPECT_TRUE(i2v_rules.takes_end_image);
  EXPECT_DOUBLE_EQ(i2v_rules.expert_boundary, 0.9);
}

TEST(A14bRequest, OneGuideScaleGivenSetsBothAndTheSecondOverridesTheLowNoiseOne) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.guide_scale = 6.0f;
  EXPECT_FLOAT_EQ(resolve(r, a14b(kT2V_A14B), std::nullopt).low_noise_guide_scale, 6.0f);
  r.low_noise_guide_scale = 2.0f;
  const ResolvedRequest both = resolve(r, a14b(kT2V_A14B), std::nullopt);
  EXPECT_FLOAT_EQ(both.guide_scale, 6.0f);
  EXPECT_FLOAT_EQ(both.low_noise_guide_scale, 2.0f);
  r.sampler = "distill4";
  r.guide_scale.reset();
  r.low_noise_guide_scale.reset();
  const ResolvedRequest distilled = resolve(r, a14b(kT2V_A14B), std::nullopt);
  EXPECT_FLOAT_EQ(distilled.guide_scale, 1.0f);
  EXPECT_FLOAT_EQ(distilled.low_noise_guide_scale, 1.0f);
}

TEST(A14bRequest, RefusesWhatTheModelDoesNotTake) {
  test::ScratchDir dir;
  const auto refused = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
      return std::string(e.what());
    }
    ADD_FAILURE() << "not refused";
    return std::string();
  };
  // I2V without a start image; an end image on TI2V; --cfg-low on a one-expert model.
  EXPECT_NE(
      refused([&] { resolve(request(dir), a14b(kI2V_A14B), std::nullopt); }).find("start image"),
      std::string::npos);
  GenerationRequest end = request(dir);
  end.image = dir / "a.png";
  end.end_image = dir / "b.png";
  EXPECT_NE(refused([&] { resolve(end, model(kTI2V_5B), std::pair(64, 64)); }).find("end image"),
            std::string::npos);
  GenerationRequest low = request(dir);
  low.low_noise_guide_scale = 2.0f;
  EXPECT_NE(refused([&] { resolve(low, model(kTI2V_5B), std::nullopt); }).find("one expert"),
            std::string::npos);
  // An end image without a start image (MiniMax-H3 takes one: its I2VA from the last frame,
  // tests/pipeline/h3_generator_test.cpp; Wan does not).
  GenerationRequest only_end = request(dir);
  only_end.end_image = dir / "b.png";
  EXPECT_NE(
      refused([&] { resolve(only_end, a14b(kI2V_A14B), std::pair(64, 64)); }).find("start image"),
      std::string::npos);
  EXPECT_NE(refused([&] { resolve(only_end, model(kTI2V_5B), std::pair(64, 64)); }).find("image"),
            std::string::npos);
}

// Issue 23 item 7: a 10×4000 start image made "0 × 10240" (TI2V's rule divided by a zero width).
// Both size rules now give a side outside the limits, and the request is refused naming the image.
TEST(A14bRequest, AnExtremeAspectStartImageIsRefusedNotMadeZeroWide) {
  test::ScratchDir dir;
  GenerationRequest r = request(dir);
  r.image = dir / "strip.png";
  for (const ModelSet& m : {model(kTI2V_5B), a14b(kI2V_A14B)}) {
    for (const auto& size : {std::pair(10, 4000), std::pair(4000, 10)}) {
      try {
        resolve(r, m, size);
        ADD_FAILURE() << m.dit_config.name << " took " << size.first << "x" << size.second;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kBadArgument);
        const std::string what = e.what();
        EXPECT_NE(what.find(std::to_string(size.first) + "×" + std::to_string(size.second)),
                  std::string::npos)
            << what;
        EXPECT_EQ(what.find(" 0 "), std::string::npos) << what;
      }
    }
  }
  // A wide but reasonable image still works (21:9 at TI2V's area).
  EXPECT_NO_THROW(resolve(r, model(kTI2V_5B), std::pair(2560, 1080)));
}

}  // namespace
}  // namespace ferry::models::wan
