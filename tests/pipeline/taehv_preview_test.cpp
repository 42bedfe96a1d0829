// Live previews with a TAEHV file in the model set (core/models/taehv/taehv_preview.h through
// core/models/wan/run.cpp): the demo model with the tiny taew2_2 decoder next to it sends pictures
// of the video's half size, each step's stats say whether its preview was made (and its time) or
// skipped, and the plan counts the decoder; without the file the previews stay the latent's
// colour sketch and the steps carry no preview figures. Needs FFmpeg (the run writes an MP4).
#if defined(FERRY_HAVE_FFMPEG)

#include "core/models/taehv/taehv_preview.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/io/tensor_set.h"
#include "core/models/wan/demo_model.h"
#include "core/models/wan/model_set.h"
#include "core/models/wan/parts.h"
#include "core/pipeline/session.h"
#include "tests/test_support.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr std::uint64_t kGiB = 1ull << 30;

struct Previews final : ProgressSink {
  int steps = 0;
  std::vector<std::pair<int, int>> sizes;
  void step(const StepProgress&) override { ++steps; }
  void preview(const media::RgbImage& image) override {
    sizes.emplace_back(image.width, image.height);
    EXPECT_EQ(image.rgb.size(), static_cast<std::size_t>(image.width) * image.height * 3);
  }
};

Session cpu_session() {
  SessionOptions o;
  o.machine = offload::MachineInfo{false, 0, 0, 16 * kGiB, 12 * kGiB};
  return Session(std::move(o));
}

GenerationRequest request_for(const fs::path& model, const fs::path& out) {
  GenerationRequest r;
  r.model = {model};
  r.prompt = "a ferry crossing a fjord at dawn";
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 4;
  r.seed = 7;
  r.preset = "cpu";
  r.output = out;
  return r;
}

TEST(TaehvPreview, a_model_with_a_taehv_file_previews_pictures_within_the_budget) {
  test::ScratchDir dir;
  const fs::path demo = models::wan::write_demo_model(dir / "demo");
  fs::copy_file(test::data_path("taehv/taew2_2_tiny.safetensors"), demo / "taew2_2.safetensors");
  const Session session = cpu_session();
  const auto model = session.find({demo});
  Previews sink;
  CancelToken cancel;
  const GenerationResult result =
      session.run(*model, request_for(demo, dir / "clip.mp4"), sink, cancel);
  ASSERT_EQ(result.steps.size(), 4u);
  int made = 0;
  for (const offload::StepStats& s : result.steps) {
    EXPECT_TRUE(s.preview_noted) << "step " << s.step;
    EXPECT_NE(s.preview_skipped, s.preview_seconds > 0) << "step " << s.step;
    made += s.preview_skipped ? 0 : 1;
  }
  // The first step's preview is always made (it measures the cost); each made one reached the
  // sink, at half the video's size (the preview decoder's last upsample is off).
  EXPECT_FALSE(result.steps[0].preview_skipped);
  ASSERT_EQ(static_cast<int>(sink.sizes.size()), made);
  for (const auto& size : sink.sizes) EXPECT_EQ(size, (std::pair<int, int>{32, 32}));
}

// The small animated preview (TaehvPreview::decode_all): a sink that asks gets, after each
// picture preview, every latent frame as a small picture (time upscaling and every upsample off:
// the latent's size × taew2_2's patch 2); one that does not ask gets none.
struct AnimatedPreviews final : ProgressSink {
  bool wanted = true;
  int pictures = 0;
  std::vector<std::vector<std::pair<int, int>>> animations;
  void preview(const media::RgbImage&) override { ++pictures; }
  bool wants_preview_frames() const override { return wanted; }
  void preview_frames(const std::vector<media::RgbImage>& frames) override {
    EXPECT_EQ(static_cast<int>(animations.size()), pictures - 1);  // after its picture
    std::vector<std::pair<int, int>> sizes;
    for (const media::RgbImage& f : frames) {
      EXPECT_EQ(f.rgb.size(), static_cast<std::size_t>(f.width) * f.height * 3);
      sizes.emplace_back(f.width, f.height);
    }
    animations.push_back(std::move(sizes));
  }
};

TEST(TaehvPreview, a_sink_that_asks_gets_every_latent_frame_small_after_each_picture) {
  test::ScratchDir dir;
  const fs::path demo = models::wan::write_demo_model(dir / "demo");
  fs::copy_file(test::data_path("taehv/taew2_2_tiny.safetensors"), demo / "taew2_2.safetensors");
  const Session session = cpu_session();
  const auto model = session.find({demo});
  AnimatedPreviews sink;
  CancelToken cancel;
  session.run(*model, request_for(demo, dir / "clip.mp4"), sink, cancel);
  ASSERT_GE(sink.pictures, 1);
  ASSERT_EQ(static_cast<int>(sink.animations.size()), sink.pictures);
  // 5 frames: 2 latent frames of 4 × 4 positions, 8 × 8 pixels each.
  for (const auto& sizes : sink.animations) {
    EXPECT_EQ(sizes, (std::vector<std::pair<int, int>>{{8, 8}, {8, 8}}));
  }
  AnimatedPreviews silent;
  silent.wanted = false;
  session.run(*model, request_for(demo, dir / "clip2.mp4"), silent, cancel);
  EXPECT_GE(silent.pictures, 1);
  EXPECT_TRUE(silent.animations.empty());
}

TEST(TaehvPreview, without_a_taehv_file_previews_stay_the_latent_sketch) {
  test::ScratchDir dir;
  const fs::path demo = models::wan::write_demo_model(dir / "demo");
  const Session session = cpu_session();
  const auto model = session.find({demo});
  Previews sink;
  CancelToken cancel;
  const GenerationResult result =
      session.run(*model, request_for(demo, dir / "clip.mp4"), sink, cancel);
  ASSERT_EQ(sink.sizes.size(), 4u);
  // The sketch is one pixel per latent position: 64 / 16.
  for (const auto& size : sink.sizes) EXPECT_EQ(size, (std::pair<int, int>{4, 4}));
  for (const offload::StepStats& s : result.steps) EXPECT_FALSE(s.preview_noted);
}

TEST(TaehvPreview, the_plan_counts_the_preview_decoder) {
  test::ScratchDir dir;
  const fs::path demo = models::wan::write_demo_model(dir / "demo");
  const Session session = cpu_session();
  const GenerationRequest request = request_for(demo, dir / "clip.mp4");
  const auto plan = [&] {
    const auto model = session.find({demo});
    return session.plan(*model, session.validate(*model, request));
  };
  const models::GenerationPlan without = plan();
  fs::copy_file(test::data_path("taehv/taew2_2_tiny.safetensors"), demo / "taew2_2.safetensors");
  const models::GenerationPlan with = plan();
  const io::TensorSet taehv = io::TensorSet::open(demo / "taew2_2.safetensors");
  // The demo latent: 64 / 16 = 4 positions a side.
  const std::uint64_t preview = models::taehv::TaehvPreview::device_bytes(taehv, 4, 4);
  EXPECT_GT(preview, 0u);
  ASSERT_EQ(with.stages.size(), without.stages.size());
  for (std::size_t i = 0; i < with.stages.size(); ++i) {
    const bool dit = with.stages[i].stage == models::wan::kDitStage;
    EXPECT_EQ(with.stages[i].activation_bytes,
              without.stages[i].activation_bytes + (dit ? preview : 0))
        << with.stages[i].stage;
  }
}

}  // namespace
}  // namespace ferry::pipeline

#endif  // FERRY_HAVE_FFMPEG
