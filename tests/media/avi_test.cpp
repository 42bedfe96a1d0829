// The uncompressed AVI fallback (core/media/avi.h), on every lane; where FFmpeg exists it also
// reads the file back, as any player would.
#include "core/media/avi.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "tests/test_support.h"
#ifdef FERRY_HAVE_FFMPEG
#include "core/media/video_reader.h"
#endif

namespace ferry::media {
namespace {

RgbImage pattern(int width, int height, int index) {
  RgbImage f{width, height,
             std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * 3)};
  for (std::size_t i = 0; i < f.rgb.size(); ++i) {
    f.rgb[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(index) * 31);
  }
  return f;
}

void write_clip(const std::filesystem::path& path, int width, int height, int frames) {
  AviWriter avi(path, width, height, 16, "a ferry", R"({"seed":7})");
  for (int i = 0; i < frames; ++i) avi.write(pattern(width, height, i));
  avi.finish();
}

TEST(Avi, FramesSizeRateAndCommentReadBackExactly) {
  test::ScratchDir dir;
  write_clip(dir / "clip.avi", 13, 6, 5);  // odd width: rows are padded to 4 bytes
  EXPECT_FALSE(std::filesystem::exists(dir / "clip.avi.partial"));
  const AviInfo info = probe_avi(dir / "clip.avi");
  EXPECT_EQ(info.width, 13);
  EXPECT_EQ(info.height, 6);
  EXPECT_EQ(info.fps, 16);
  EXPECT_EQ(info.frames, 5);
  EXPECT_EQ(info.info.at("ICMT"), R"({"seed":7})");
  EXPECT_EQ(info.info.at("INAM"), "a ferry");
  const std::vector<RgbImage> frames = read_avi_frames(dir / "clip.avi");
  ASSERT_EQ(frames.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(frames[static_cast<std::size_t>(i)].rgb, pattern(13, 6, i).rgb);
}

#ifdef FERRY_HAVE_FFMPEG
TEST(Avi, FfmpegReadsTheSameFrames) {
  test::ScratchDir dir;
  write_clip(dir / "clip.avi", 16, 8, 3);
  const VideoInfo info = probe_video(dir / "clip.avi");
  EXPECT_EQ(info.frames, 3);
  EXPECT_EQ(info.width, 16);
  EXPECT_DOUBLE_EQ(info.fps, 16.0);
  const auto frames = read_video_frames(dir / "clip.avi");
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[1].rgb, pattern(16, 8, 1).rgb);
}
#endif

TEST(Avi, AnAbandonedWriterLeavesNothing) {
  test::ScratchDir dir;
  {
    AviWriter avi(dir / "clip.avi", 8, 8, 16, "", "");
    avi.write(pattern(8, 8, 0));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(Avi, RefusesOtherFilesAndBadSettings) {
  test::ScratchDir dir;
  test::write_file(dir / "x.avi", std::string_view("RIFF....WAVEfmt "));
  EXPECT_EQ(test::error_code_of([&] { probe_avi(dir / "x.avi"); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { probe_avi(dir / "absent.avi"); }), ErrorCode::kIo);
  EXPECT_EQ(test::error_code_of([&] { AviWriter a(dir / "y.avi", 0, 8, 16, "", ""); }),
            ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { AviWriter a(dir / "y.avi", 8, 8, 0, "", ""); }),
            ErrorCode::kBadArgument);
}

}  // namespace
}  // namespace ferry::media
