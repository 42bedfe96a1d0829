// VideoWriter, probe_video, read_audio and read_video_frames in builds without FFmpeg:
// uncompressed AVI (core/media/avi.h), the honest fallback of the mingw-w64 lane, with the
// soundtrack as a 16-bit WAV beside it ("<name>.wav", core/media/audio.h).
#include <algorithm>
#include <memory>
#include <string>

#include "core/error.h"
#include "core/media/avi.h"
#include "core/media/video_reader.h"
#include "core/media/video_writer.h"

namespace ferry::media {

std::string_view video_extension() {
  return ".avi";
}

namespace {

std::filesystem::path soundtrack_beside(const std::filesystem::path& video) {
  std::filesystem::path wav = video;
  return wav.replace_extension(".wav");
}

}  // namespace

struct VideoWriter::Impl {
  std::unique_ptr<AviWriter> avi;
  std::string encoder = "uncompressed AVI";
  std::filesystem::path path;
  AudioTrack audio;
  std::filesystem::path wav;  // the user's export (VideoSettings::soundtrack_wav)
  int fps = 0;
  std::int64_t audio_written = 0;
};

VideoWriter::VideoWriter(const std::filesystem::path& path, const VideoSettings& settings)
    : impl_(std::make_unique<Impl>()) {
  const auto tag = [&](const char* key) {
    const auto it = settings.metadata.find(key);
    return it != settings.metadata.end() ? it->second : std::string();
  };
  if (!settings.audio.empty()) check_audio_track(settings.audio, "the soundtrack");
  check_wav_export(settings.soundtrack_wav, settings.audio);
  impl_->avi = std::make_unique<AviWriter>(path, settings.width, settings.height, settings.fps,
                                           tag("title"), tag("comment"));
  impl_->path = path;
  impl_->audio = settings.audio;
  impl_->wav = settings.soundtrack_wav;
  impl_->fps = settings.fps;
}

VideoWriter::~VideoWriter() = default;
void VideoWriter::write(const RgbImage& frame) {
  impl_->avi->write(frame);
}
void VideoWriter::finish() {
  Impl& m = *impl_;
  if (m.audio.empty()) {
    m.avi->finish();
    return;
  }
  // The soundtrack beside the AVI (its only sound) and the user's export, unless they are one.
  std::vector<std::filesystem::path> wavs = {soundtrack_beside(m.path)};
  if (!m.wav.empty() && m.wav != wavs[0]) wavs.push_back(m.wav);
  const AudioTrack cut = cut_to_video(m.audio, m.avi->frames_written(), m.fps);
  commit_with_wavs(wavs, cut, [&] { m.avi->finish(); });
  m.audio_written = cut.frames();
}
const std::string& VideoWriter::encoder() const {
  return impl_->encoder;
}
std::int64_t VideoWriter::frames_written() const {
  return impl_->avi->frames_written();
}
std::int64_t VideoWriter::audio_frames_written() const {
  return impl_->audio_written;
}

VideoInfo probe_video(const std::filesystem::path& path) {
  const AviInfo avi = probe_avi(path);
  VideoInfo info;
  info.width = avi.width;
  info.height = avi.height;
  info.fps = avi.fps;
  info.frames = avi.frames;
  info.codec = "rawvideo";
  info.pixel_format = "bgr24";
  if (avi.info.count("ICMT")) info.metadata["comment"] = avi.info.at("ICMT");
  if (avi.info.count("INAM")) info.metadata["title"] = avi.info.at("INAM");
  info.seconds = avi.fps > 0 ? static_cast<double>(avi.frames) / avi.fps : 0.0;
  const AudioTrack audio = read_audio(path);
  if (!audio.empty()) {
    info.audio_codec = "pcm_s16le";
    info.audio_sample_rate = audio.sample_rate;
    info.audio_channels = audio.channels;
    info.audio_seconds = audio.seconds();
  }
  return info;
}

AudioTrack read_audio(const std::filesystem::path& path) {
  const std::filesystem::path wav = soundtrack_beside(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(wav, ec)) return AudioTrack{};
  return read_wav(wav);
}

std::vector<RgbImage> read_video_frames(const std::filesystem::path& path,
                                        std::int64_t max_frames) {
  std::vector<RgbImage> frames = read_avi_frames(path);
  if (static_cast<std::int64_t>(frames.size()) > max_frames) {
    throw Error(ErrorCode::kBadArgument,
                "the video has more than " + std::to_string(max_frames) + " frames");
  }
  return frames;
}

}  // namespace ferry::media
