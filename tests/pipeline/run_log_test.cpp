// The per-run log (core/pipeline/run_log.h): one file per run, events logged and passed on, the
// outcome written, old logs pruned, and a folder that cannot take a log refused with kIo.
#include "core/pipeline/run_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/test_support.h"

namespace ferry::pipeline {
namespace {

namespace fs = std::filesystem;

struct Counter final : ProgressSink {
  int stages = 0, steps = 0, previews = 0, animations = 0;
  void stage(Stage) override { ++stages; }
  void step(const StepProgress&) override { ++steps; }
  void preview(const media::RgbImage&) override { ++previews; }
  bool wants_preview_frames() const override { return true; }
  void preview_frames(const std::vector<media::RgbImage>&) override { ++animations; }
};

std::string text_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::set<std::string> names_in(const fs::path& folder) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.insert(e.path().filename().string());
  return names;
}

GenerationRequest request() {
  GenerationRequest r;
  r.model = {"models/wan22"};
  r.prompt = "a ferry crossing a fjord at dawn";
  r.seed = 42;
  r.preset = "laptop-8gb";
  r.output = "out/clip.mp4";
  return r;
}

TEST(RunLog, LogsEachEventAndPassesItOn) {
  test::ScratchDir dir;
  Counter counter;
  RunLog log(dir / "logs", counter);
  EXPECT_EQ(log.path().parent_path(), dir / "logs");
  EXPECT_EQ(log.path().extension(), ".log");

  log.started(request(),
              offload::MachineInfo{true, 8ull << 30, 7ull << 30, 24ull << 30, 16ull << 30}, "cuda");
  log.stage(Stage::kDenoise);
  StepProgress p;
  p.step = 1;
  p.steps = 2;
  p.stats.step = 1;
  p.stats.bytes_read = 12345;
  log.step(p);
  log.preview(media::RgbImage{2, 2, std::vector<std::uint8_t>(12)});
  // The animated preview is asked for when the wrapped sink asks, and handed on.
  EXPECT_TRUE(log.wants_preview_frames());
  log.preview_frames({media::RgbImage{2, 2, std::vector<std::uint8_t>(12)}});
  GenerationResult result;
  result.video = "out/clip.mp4";
  result.encoder = "libx264";
  result.settings.width = 832;
  result.settings.height = 480;
  result.settings.frames = 81;
  result.settings.request.seed = 42;
  offload::StageStats denoise;
  denoise.stage = "denoise";
  denoise.seconds = 1.5;
  result.stages.push_back(denoise);
  log.finished(result);

  EXPECT_EQ(counter.stages, 1);
  EXPECT_EQ(counter.steps, 1);
  EXPECT_EQ(counter.previews, 1);
  EXPECT_EQ(counter.animations, 1);
  const std::string text = text_of(log.path());
  for (const char* expected :
       {"Ferry " FERRY_VERSION " run started", "GPU with 8.00 GiB VRAM (7.00 GiB free)",
        "RAM 24.00 GiB (16.00 GiB available)", "backend: cuda, preset: laptop-8gb",
        "prompt: a ferry crossing a fjord at dawn", "(the model's default)", "seed 42",
        "stage: denoising", "step 1/2 {\"step\":1", "\"bytes_read\":12345",
        "stage denoise {\"stage\":\"denoise\"", "finished: ", "libx264, 832x480, 81 frames"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << "missing: " << expected << "\n" << text;
  }
}

TEST(RunLog, AFailureAndACancelAreTheLastWord) {
  test::ScratchDir dir;
  Counter counter;
  {
    RunLog log(dir.path(), counter);
    log.failed(Error(ErrorCode::kDoesNotFit, "the DiT needs 9.1 GiB of VRAM; the preset has 6.8"));
    const std::string text = text_of(log.path());
    EXPECT_NE(text.find("failed (does not fit): the DiT needs 9.1 GiB"), std::string::npos) << text;
  }
  RunLog cancelled(dir.path(), counter);
  cancelled.cancelled();
  EXPECT_NE(text_of(cancelled.path()).find("cancelled"), std::string::npos);
}

TEST(RunLog, RunsInTheSameSecondGetTheirOwnFiles) {
  test::ScratchDir dir;
  Counter counter;
  RunLog a(dir.path(), counter);
  RunLog b(dir.path(), counter);
  RunLog c(dir.path(), counter);
  EXPECT_NE(a.path(), b.path());
  EXPECT_NE(b.path(), c.path());
  EXPECT_NE(a.path(), c.path());
  EXPECT_EQ(names_in(dir.path()).size(), 3u);
}

TEST(RunLog, OnlyTheNewestLogsStayAndNothingElseIsTouched) {
  test::ScratchDir dir;
  for (const char* old : {"ferry-20240101-000000.log", "ferry-20240102-000000.log",
                          "ferry-20240103-000000.log", "ferry-20240104-000000.log"}) {
    test::write_file(dir / old, "old run\n");
  }
  test::write_file(dir / "notes.txt", "mine\n");
  test::write_file(dir / "ferry.log.txt", "mine too\n");
  Counter counter;
  RunLog log(dir.path(), counter, 3);
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"ferry-20240103-000000.log", "ferry-20240104-000000.log",
                                   log.path().filename().string(), "notes.txt", "ferry.log.txt"}));
}

TEST(RunLog, AFolderThatCannotTakeALogIsAnIoError) {
  test::ScratchDir dir;
  test::write_file(dir / "not-a-folder", "x");
  Counter counter;
  EXPECT_EQ(test::error_code_of([&] { RunLog log(dir / "not-a-folder" / "logs", counter); }),
            ErrorCode::kIo);
}

}  // namespace
}  // namespace ferry::pipeline
