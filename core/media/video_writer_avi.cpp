// VideoWriter, probe_video and read_video_frames in builds without FFmpeg: uncompressed AVI
// (core/media/avi.h), the honest fallback of the mingw-w64 lane.
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

struct VideoWriter::Impl {
  std::unique_ptr<AviWriter> avi;
  std::string encoder = "uncompressed AVI";
};

VideoWriter::VideoWriter(const std::filesystem::path& path, const VideoSettings& settings)
    : impl_(std::make_unique<Impl>()) {
  const auto tag = [&](const char* key) {
    const auto it = settings.metadata.find(key);
    return it != settings.metadata.end() ? it->second : std::string();
  };
  impl_->avi = std::make_unique<AviWriter>(path, settings.width, settings.height, settings.fps,
                                           tag("title"), tag("comment"));
}

VideoWriter::~VideoWriter() = default;
void VideoWriter::write(const RgbImage& frame) {
  impl_->avi->write(frame);
}
void VideoWriter::finish() {
  impl_->avi->finish();
}
const std::string& VideoWriter::encoder() const {
  return impl_->encoder;
}
std::int64_t VideoWriter::frames_written() const {
  return impl_->avi->frames_written();
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
  return info;
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
