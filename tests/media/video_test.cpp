// MP4 output through FFmpeg, read back with FFmpeg. Compiles to nothing where FFmpeg is absent
// (the mingw lane).
#ifdef FERRY_HAVE_FFMPEG

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/media/video_reader.h"
#include "core/media/video_writer.h"
#include "tests/test_support.h"

namespace ferry::media {
namespace {

// A smooth moving pattern (what a codec handles well), different in every frame.
RgbImage frame(int width, int height, int index) {
  RgbImage image{width, height,
                 std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      std::uint8_t* p = &image.rgb[(static_cast<std::size_t>(y) * width + x) * 3];
      p[0] = static_cast<std::uint8_t>(128 + 100 * std::sin((x + 3 * index) * 0.09));
      p[1] = static_cast<std::uint8_t>(128 + 100 * std::cos((y + 2 * index) * 0.11));
      p[2] = static_cast<std::uint8_t>(60 + (x + y + 4 * index) / 2);
    }
  }
  return image;
}

double psnr(const RgbImage& a, const RgbImage& b) {
  double se = 0;
  for (std::size_t i = 0; i < a.rgb.size(); ++i) {
    const double d = static_cast<double>(a.rgb[i]) - b.rgb[i];
    se += d * d;
  }
  const double mse = se / static_cast<double>(a.rgb.size());
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

std::filesystem::path write_clip(const std::filesystem::path& path, int frames,
                                 std::vector<std::string> encoders = {},
                                 std::string* used = nullptr) {
  VideoSettings s;
  s.width = 96;
  s.height = 64;
  s.fps = 16;
  s.metadata = {{"comment", R"({"prompt":"a ferry at dawn","seed":42})"},
                {"ferry_version", "0.1.0"}};
  s.encoders = std::move(encoders);
  VideoWriter writer(path, s);
  for (int i = 0; i < frames; ++i) writer.write(frame(96, 64, i));
  writer.finish();
  if (used != nullptr) *used = writer.encoder();
  return path;
}

TEST(MediaVideo, WritesAnH264Mp4WithFrameCountSizeRateAndMetadata) {
  test::ScratchDir dir;
  std::string encoder;
  write_clip(dir / "clip.mp4", 9, {}, &encoder);
  EXPECT_FALSE(std::filesystem::exists(dir / "clip.mp4.partial"));
  const VideoInfo info = probe_video(dir / "clip.mp4");
  EXPECT_EQ(info.frames, 9);
  EXPECT_EQ(info.width, 96);
  EXPECT_EQ(info.height, 64);
  EXPECT_DOUBLE_EQ(info.fps, 16.0);
  EXPECT_EQ(info.pixel_format, "yuv420p");
#if defined(_WIN32)
  // The Windows build's FFmpeg is LGPL, without libx264: NVENC or Media Foundation where they
  // start (a GPU, a desktop Windows), MPEG-4 otherwise.
  EXPECT_NE(encoder, "libx264");
  EXPECT_EQ(info.codec, encoder == "mpeg4" ? "mpeg4" : "h264");
#else
  // Debian's FFmpeg has libx264; the fallback order is tested below.
  EXPECT_EQ(encoder, "libx264");
  EXPECT_EQ(info.codec, "h264");
#endif
  EXPECT_EQ(info.metadata.at("comment"), R"({"prompt":"a ferry at dawn","seed":42})");
  EXPECT_EQ(info.metadata.at("ferry_version"), FERRY_VERSION);
}

TEST(MediaVideo, DecodedFramesAreCloseToWhatWasWritten) {
  test::ScratchDir dir;
  write_clip(dir / "clip.mp4", 5);
  const std::vector<RgbImage> frames = read_video_frames(dir / "clip.mp4");
  ASSERT_EQ(frames.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    // CRF 17 on 4:2:0: chroma subsampling alone costs a few dB on this colourful pattern.
    EXPECT_GT(psnr(frames[static_cast<std::size_t>(i)], frame(96, 64, i)), 35.0) << "frame " << i;
  }
}

// The guard against huge files: a video of more frames than the reader may return is refused,
// naming the limit; one of exactly that many is read whole.
TEST(MediaVideo, ReadingMoreFramesThanTheLimitIsABadArgument) {
  test::ScratchDir dir;
  write_clip(dir / "clip.mp4", 5);
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  try {
    read_video_frames(dir / "clip.mp4", 3);
  } catch (const Error& e) {
    code = e.code();
    message = e.what();
  }
  EXPECT_EQ(code, ErrorCode::kBadArgument);
  EXPECT_NE(message.find("more than 3 frames"), std::string::npos) << message;
  EXPECT_EQ(read_video_frames(dir / "clip.mp4", 5).size(), 5u);
}

// Replays: the same frames give the same file, byte for byte, however often they are written in
// one process. x264 on its AVX-512 paths did not (VideoWriter caps them): at 96x64 with 9 frames,
// 33 writes in 40 differed from the first, so 8 writes show it with near certainty; 5 frames
// showed it 1 time in 40.
TEST(MediaVideo, TheSameFramesGiveTheSameVideo) {
  test::ScratchDir dir;
  write_clip(dir / "first.mp4", 9);
  const auto first = test::read_file(dir / "first.mp4");
  for (int i = 0; i < 8; ++i) {
    write_clip(dir / "again.mp4", 9);
    ASSERT_TRUE(test::read_file(dir / "again.mp4") == first) << "write " << i + 2;
    std::filesystem::remove(dir / "again.mp4");
  }
  write_clip(dir / "again.mp4", 9);
  const auto a = read_video_frames(dir / "first.mp4");
  const auto b = read_video_frames(dir / "again.mp4");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].rgb, b[i].rgb);
}

TEST(MediaVideo, FallsBackToMpeg4WithoutAnH264Encoder) {
  test::ScratchDir dir;
  std::string encoder;
  write_clip(dir / "clip.mp4", 3, {"h264_no_such_encoder", "mpeg4"}, &encoder);
  EXPECT_EQ(encoder, "mpeg4");
  const VideoInfo info = probe_video(dir / "clip.mp4");
  EXPECT_EQ(info.codec, "mpeg4");
  EXPECT_EQ(info.frames, 3);
}

TEST(MediaVideo, NoEncoderIsAClearError) {
  test::ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] { write_clip(dir / "clip.mp4", 1, {"no_such_encoder"}); }),
            ErrorCode::kUnsupported);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MediaVideo, AnAbandonedWriterLeavesNothing) {
  test::ScratchDir dir;
  {
    VideoSettings s;
    s.width = 96;
    s.height = 64;
    VideoWriter writer(dir / "clip.mp4", s);
    writer.write(frame(96, 64, 0));
    EXPECT_TRUE(std::filesystem::exists(dir / "clip.mp4.partial"));
  }  // cancelled: destroyed without finish()
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MediaVideo, RefusesOddSizesAndBadFrameRates) {
  test::ScratchDir dir;
  VideoSettings s;
  s.width = 95;
  s.height = 64;
  EXPECT_EQ(test::error_code_of([&] { VideoWriter w(dir / "a.mp4", s); }), ErrorCode::kBadArgument);
  s.width = 96;
  s.fps = 0;
  EXPECT_EQ(test::error_code_of([&] { VideoWriter w(dir / "a.mp4", s); }), ErrorCode::kBadArgument);
}

TEST(MediaVideo, ProbingSomethingElseIsABadArgument) {
  test::ScratchDir dir;
  test::write_file(dir / "x.mp4", std::string_view("not a video"));
  EXPECT_EQ(test::error_code_of([&] { probe_video(dir / "x.mp4"); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { probe_video(dir / "absent.mp4"); }), ErrorCode::kIo);
}

}  // namespace
}  // namespace ferry::media

#endif  // FERRY_HAVE_FFMPEG
