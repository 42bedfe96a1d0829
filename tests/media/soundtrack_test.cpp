// Videos with sound (core/media: VideoSettings::audio, read_audio, the WAV writer), on every lane:
// with FFmpeg an MP4 with H.264 and AAC, checked with Ferry's reader and with the ffprobe tool
// when it is installed; without FFmpeg (the mingw lane, under Wine) the AVI with its soundtrack as
// a WAV beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/media/audio.h"
#include "core/media/video_reader.h"
#include "core/media/video_writer.h"
#include "tests/test_support.h"

namespace ferry::media {
namespace {

constexpr int kRate = 32000;
constexpr int kFps = 24;

// Stereo tones (what H3's soundtracks are made of at their simplest): a chord left, another
// right, with a slow swell, so a channel swap or a shift shows.
AudioTrack tones(double seconds) {
  const auto frames = static_cast<std::int64_t>(seconds * kRate);
  std::vector<std::vector<float>> planar(2, std::vector<float>(static_cast<std::size_t>(frames)));
  for (std::int64_t i = 0; i < frames; ++i) {
    const double t = static_cast<double>(i) / kRate;
    const double swell = 0.6 + 0.4 * std::sin(2 * std::numbers::pi * 0.7 * t);
    planar[0][static_cast<std::size_t>(i)] =
        static_cast<float>(swell * (0.3 * std::sin(2 * std::numbers::pi * 440 * t) +
                                    0.2 * std::sin(2 * std::numbers::pi * 1320 * t)));
    planar[1][static_cast<std::size_t>(i)] =
        static_cast<float>(swell * (0.3 * std::sin(2 * std::numbers::pi * 554 * t) +
                                    0.15 * std::sin(2 * std::numbers::pi * 2500 * t)));
  }
  return interleave(planar, kRate);
}

RgbImage frame(int index) {
  RgbImage image{64, 48, std::vector<std::uint8_t>(64 * 48 * 3)};
  for (std::size_t i = 0; i < image.rgb.size(); ++i) {
    image.rgb[i] = static_cast<std::uint8_t>(i * 3 + static_cast<std::size_t>(index) * 17);
  }
  return image;
}

// Writes `frames` frames with `audio` (H3's 124 frames and 207 latents of audio are 5.1667 s of
// video for 5.175 s of sound: the soundtrack is longer than the video by a third of a frame).
// `wav`: the soundtrack exported there too (VideoSettings::soundtrack_wav).
std::filesystem::path write_clip(const test::ScratchDir& dir, int frames, const AudioTrack& audio,
                                 const std::filesystem::path& wav = {}) {
  const std::filesystem::path path = dir / ("clip" + std::string(video_extension()));
  VideoSettings s;
  s.width = 64;
  s.height = 48;
  s.fps = kFps;
  s.audio = audio;
  s.soundtrack_wav = wav;
  VideoWriter writer(path, s);
  for (int i = 0; i < frames; ++i) writer.write(frame(i));
  writer.finish();
  return path;
}

// 10·log10(signal power / error power) per channel, over frames [skip, n − skip) (AAC's first and
// last frames ramp).
std::vector<double> snr_db(const AudioTrack& got, const AudioTrack& want, std::int64_t skip) {
  std::vector<double> out;
  for (int c = 0; c < want.channels; ++c) {
    double signal = 0, error = 0;
    for (std::int64_t f = skip; f < want.frames() - skip; ++f) {
      const double w = want.samples[static_cast<std::size_t>(f * want.channels + c)];
      const double g = got.samples[static_cast<std::size_t>(f * got.channels + c)];
      signal += w * w;
      error += (g - w) * (g - w);
    }
    out.push_back(10 * std::log10(signal / error));
  }
  return out;
}

TEST(MediaSoundtrack, TheSoundtrackIsStereo32kHzOfTheVideosDurationAndDecodesBackToThePcm) {
  test::ScratchDir dir;
  const int frames = 124;
  const AudioTrack written = tones(207 * 800.0 / kRate);  // H3: 207 latents × 800 samples
  const std::filesystem::path path = write_clip(dir, frames, written);
  EXPECT_FALSE(std::filesystem::exists(dir / "clip.mp4.partial"));

  const VideoInfo info = probe_video(path);
  EXPECT_EQ(info.frames, frames);
  EXPECT_EQ(info.audio_sample_rate, kRate);
  EXPECT_EQ(info.audio_channels, 2);
  const double video_seconds = static_cast<double>(frames) / kFps;
  // The soundtrack is cut to the video: the two durations within one video frame.
  EXPECT_NEAR(info.audio_seconds, video_seconds, 1.0 / kFps);
  EXPECT_NEAR(info.seconds, video_seconds, 1e-6);

  const AudioTrack read = read_audio(path);
  EXPECT_EQ(read.sample_rate, kRate);
  ASSERT_EQ(read.channels, 2);
  EXPECT_NEAR(read.seconds(), video_seconds, 1.0 / kFps);
  ASSERT_GE(read.frames(), frames * kRate / kFps - 1024);
  AudioTrack cut = written;  // what was written, up to the video's end
  cut.samples.resize(static_cast<std::size_t>(std::min(read.frames(), written.frames()) * 2));
#ifdef FERRY_HAVE_FFMPEG
#if defined(_WIN32)
  // The Windows build's LGPL FFmpeg has no libx264: NVENC or Media Foundation, else MPEG-4.
  EXPECT_TRUE(info.codec == "h264" || info.codec == "mpeg4") << info.codec;
#else
  EXPECT_EQ(info.codec, "h264");
#endif
  EXPECT_EQ(info.audio_codec, "aac");
  // AAC is perceptual: it drops what masking hides, so its error is far above 16-bit PCM's. On
  // these tones at 192 kbit/s FFmpeg 5.1's native encoder measured 40.9 dB left, 47.7 dB right.
  // The bound is what sync needs: a one-sample delay alone would leave 15.9 dB left, 12.4 dB right
  // (2·sin(π·f/32000) of each tone), a channel swap about 0 dB.
  for (const double db : snr_db(read, cut, 2048)) {
    std::printf("AAC round trip: %.1f dB\n", db);
    EXPECT_GT(db, 30.0);
  }
#else
  EXPECT_EQ(info.audio_codec, "pcm_s16le");
  // 16-bit PCM: rounding to 1/32767 steps, -98 dB below full scale; these tones are ~ -13 dB.
  for (const double db : snr_db(read, cut, 0)) {
    std::printf("16-bit WAV round trip: %.1f dB\n", db);
    EXPECT_GT(db, 80.0);
  }
#endif
}

TEST(MediaSoundtrack, ASilentVideoHasNoSoundtrack) {
  test::ScratchDir dir;
  const std::filesystem::path path = write_clip(dir, 5, AudioTrack{});
  EXPECT_TRUE(read_audio(path).empty());
  EXPECT_TRUE(probe_video(path).audio_codec.empty());
}

TEST(MediaSoundtrack, AShorterSoundtrackEndsWhereItEnds) {
  test::ScratchDir dir;
  const AudioTrack written = tones(0.5);
  const std::filesystem::path path = write_clip(dir, 48, written);  // 2 s of video
  const AudioTrack read = read_audio(path);
  EXPECT_NEAR(read.seconds(), 0.5, 1.0 / kFps);
}

TEST(MediaSoundtrack, ABadSoundtrackIsRefusedBeforeAnythingIsWritten) {
  test::ScratchDir dir;
  AudioTrack odd = tones(0.1);
  odd.samples.pop_back();  // not whole frames
  EXPECT_EQ(test::error_code_of([&] { write_clip(dir, 1, odd); }), ErrorCode::kBadArgument);
  AudioTrack nan = tones(0.1);
  nan.samples[7] = std::nanf("");
  EXPECT_EQ(test::error_code_of([&] { write_clip(dir, 1, nan); }), ErrorCode::kBadArgument);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MediaSoundtrack, AnAbandonedWriterWithSoundLeavesNothing) {
  test::ScratchDir dir;
  {
    VideoSettings s;
    s.width = 64;
    s.height = 48;
    s.fps = kFps;
    s.audio = tones(1.0);
    VideoWriter writer(dir / ("clip" + std::string(video_extension())), s);
    for (int i = 0; i < 12; ++i) writer.write(frame(i));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// The user's WAV export holds the PCM itself (no AAC), cut to the video as its track is.
TEST(MediaSoundtrack, TheWavExportIsThePcmCutToTheVideo) {
  test::ScratchDir dir;
  const AudioTrack written = tones(3.0);
  write_clip(dir, 48, written, dir / "song.wav");  // 2 s of video
  const AudioTrack wav = read_wav(dir / "song.wav");
  EXPECT_EQ(wav.sample_rate, kRate);
  ASSERT_EQ(wav.channels, 2);
  ASSERT_EQ(wav.frames(), 2 * kRate);
  for (std::size_t i = 0; i < wav.samples.size(); ++i) {
    ASSERT_NEAR(wav.samples[i], written.samples[i], 0.5 / 32767 + 1e-7) << i;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "song.wav.partial"));
}

TEST(MediaSoundtrack, AWavExportOfASilentVideoIsRefusedBeforeAnythingIsWritten) {
  test::ScratchDir dir;
  EXPECT_EQ(test::error_code_of([&] { write_clip(dir, 3, AudioTrack{}, dir / "song.wav"); }),
            ErrorCode::kBadArgument);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(MediaSoundtrack, NoWavExportIsLeftWithoutItsVideo) {
  test::ScratchDir dir;
  const std::filesystem::path clip = dir / ("clip" + std::string(video_extension()));
  {  // abandoned: an error or a cancel before finish()
    VideoSettings s;
    s.width = 64;
    s.height = 48;
    s.fps = kFps;
    s.audio = tones(1.0);
    s.soundtrack_wav = dir / "song.wav";
    VideoWriter writer(clip, s);
    for (int i = 0; i < 12; ++i) writer.write(frame(i));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  // The video cannot be renamed into place (a folder holds its name): the WAV goes too.
  std::filesystem::create_directories(clip / "in the way");
  EXPECT_EQ(test::error_code_of([&] { write_clip(dir, 12, tones(1.0), dir / "song.wav"); }),
            ErrorCode::kIo);
  EXPECT_FALSE(std::filesystem::exists(dir / "song.wav"));
  EXPECT_FALSE(std::filesystem::exists(dir / "song.wav.partial"));
}

#if defined(FERRY_HAVE_FFMPEG) && !defined(_WIN32)
// What the ffprobe tool says of the file (one line per stream: codec, rate, channels, duration).
std::string ffprobe(const std::filesystem::path& path) {
  const std::string command =
      "ffprobe -v error -show_entries stream=codec_name,sample_rate,"
      "channels,duration -of compact=p=0:nk=1 \"" +
      path.string() + "\" 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  pclose(pipe);
  return out;
}

TEST(MediaSoundtrack, FfprobeReportsH264AndAacStereo32kHzOfTheRightDuration) {
  if (std::system("ffprobe -version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no ffprobe tool (Ferry's own probe checks the same in the test above)";
  }
  test::ScratchDir dir;
  const std::filesystem::path path = write_clip(dir, 124, tones(207 * 800.0 / kRate));
  const std::string report = ffprobe(path);
  // compact, values only: "h264|N/A|N/A|5.166667" then "aac|32000|2|5.166..." (stream order).
  std::printf("ffprobe: %s", report.c_str());
  double video = 0, audio = 0;
  char codec[32] = {};
  int rate = 0, channels = 0;
  std::size_t line = 0;
  for (std::size_t start = 0; start < report.size(); start = line + 1) {
    line = report.find('\n', start);
    const std::string text = report.substr(start, line - start);
    if (text.rfind("h264|", 0) == 0) {
      video = std::stod(text.substr(text.rfind('|') + 1));
    } else if (std::sscanf(text.c_str(), "%31[^|]|%d|%d|%lf", codec, &rate, &channels, &audio) ==
               4) {
      EXPECT_STREQ(codec, "aac");
    }
    if (line == std::string::npos) break;
  }
  EXPECT_NEAR(video, 124.0 / kFps, 1e-3);
  EXPECT_EQ(rate, kRate);
  EXPECT_EQ(channels, 2);
  EXPECT_NEAR(audio, video, 1.0 / kFps);
}
#endif

TEST(MediaWav, SixteenBitWavReadsBackWithinHalfAStep) {
  test::ScratchDir dir;
  const AudioTrack written = tones(0.25);
  write_wav(dir / "a.wav", written);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.wav.partial"));
  const AudioTrack read = read_wav(dir / "a.wav");
  EXPECT_EQ(read.sample_rate, kRate);
  ASSERT_EQ(read.channels, 2);
  ASSERT_EQ(read.samples.size(), written.samples.size());
  for (std::size_t i = 0; i < read.samples.size(); ++i) {
    ASSERT_NEAR(read.samples[i], written.samples[i], 0.5 / 32767 + 1e-7) << i;
  }
  // 44-byte header + 2 bytes a sample.
  EXPECT_EQ(std::filesystem::file_size(dir / "a.wav"), 44 + 2 * written.samples.size());
}

TEST(MediaWav, OtherFilesAreRefused) {
  test::ScratchDir dir;
  test::write_file(dir / "x.wav", std::string_view("RIFF\x04\0\0\0AVI "));
  EXPECT_EQ(test::error_code_of([&] { read_wav(dir / "x.wav"); }), ErrorCode::kBadArgument);
  EXPECT_EQ(test::error_code_of([&] { read_wav(dir / "absent.wav"); }), ErrorCode::kIo);
  AudioTrack empty_rate = tones(0.01);
  empty_rate.sample_rate = 0;
  EXPECT_EQ(test::error_code_of([&] { write_wav(dir / "y.wav", empty_rate); }),
            ErrorCode::kBadArgument);
  EXPECT_FALSE(std::filesystem::exists(dir / "y.wav"));
}

}  // namespace
}  // namespace ferry::media
