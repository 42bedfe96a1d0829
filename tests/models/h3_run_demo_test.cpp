// The tiny H3 demo set (core/models/h3/demo_model.h): the same bytes in every folder, found as an
// H3 model set in DiffSynth's layout and marked as the demo (its small defaults), and an intact
// demo kept as it is while one without its marker is written again.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/models/family.h"
#include "core/models/h3/demo_model.h"
#include "tests/test_support.h"

namespace ferry::models::h3 {
namespace {

namespace fs = std::filesystem;

const char* const kFiles[] = {SyntheticFiles::kDit, SyntheticFiles::kTextEncoder,
                              SyntheticFiles::kVideoVae, SyntheticFiles::kAudioVae};

TEST(H3DemoModel, WritesTheSameBytesInEveryFolder) {
  const test::ScratchDir a, b;
  write_h3_demo_model(a.path());
  write_h3_demo_model(b / "nested");
  std::uintmax_t total = 0;
  for (const char* f : kFiles) {
    const auto first = test::read_file(a / f);
    EXPECT_TRUE(first == test::read_file(b / "nested" / f)) << f << " differs between two writes";
    total += first.size();
  }
  std::printf("[ measured ] the H3 demo set: %.1f MiB in 4 files\n",
              static_cast<double>(total) / (1 << 20));
  EXPECT_LT(total, 64u << 20);
}

TEST(H3DemoModel, IsAnH3SetMarkedAsTheDemoWithItsSmallDefaults) {
  const test::ScratchDir dir;
  const auto folder = find_family("h3")->write_demo_model(dir / "demo");
  ASSERT_TRUE(folder.has_value());
  const auto parts = open_model({*folder});
  EXPECT_EQ(parts->family(), "h3");
  EXPECT_TRUE(parts->is_demo());
  const RequestRules rules = parts->rules();
  EXPECT_EQ(rules.width, 256);
  EXPECT_EQ(rules.height, 256);
  EXPECT_EQ(rules.frames, 22);
  EXPECT_EQ(rules.steps, 8);
  EXPECT_TRUE(rules.takes_start_image);
  EXPECT_TRUE(rules.takes_end_image);
  // Without the marker the same files are a plain H3 set with the release's defaults.
  fs::remove(*folder / H3DemoModel::kMarkerFile);
  const auto plain = open_model({*folder});
  EXPECT_FALSE(plain->is_demo());
  EXPECT_EQ(plain->rules().width, 1344);
}

TEST(H3DemoModel, AnIntactDemoIsKeptAndOneWithoutItsMarkerIsRewritten) {
  const test::ScratchDir dir;
  write_h3_demo_model(dir.path());
  const fs::path dit = dir / SyntheticFiles::kDit;
  const auto bytes = test::read_file(dit);
  const auto written = fs::last_write_time(dit);
  write_h3_demo_model(dir.path());
  EXPECT_EQ(fs::last_write_time(dit), written) << "an intact demo was written again";
  // A damaged file with the marker gone (a write that stopped half way) is written again.
  fs::resize_file(dit, bytes.size() / 2);
  fs::remove(dir / H3DemoModel::kMarkerFile);
  write_h3_demo_model(dir.path());
  EXPECT_TRUE(test::read_file(dit) == bytes);
  EXPECT_TRUE(is_h3_demo_folder(dir.path()));
}

}  // namespace
}  // namespace ferry::models::h3
