#include "core/media/ffmpeg_util.h"

#include <cstring>

extern "C" {
#include <libavutil/error.h>
#include <libavutil/log.h>
}

namespace ferry::media::detail {

void quiet_ffmpeg_logs() {
  // Every failure reaches the user as a ferry::Error with FFmpeg's reason in it; FFmpeg's own
  // chatter (encoder banners, probe warnings) would only clutter the CLI and the logs.
  static const bool once = [] {
    av_log_set_level(AV_LOG_FATAL);
    return true;
  }();
  (void)once;
}

std::string av_error_text(int err) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(err, text, sizeof text) < 0) return "FFmpeg error " + std::to_string(err);
  return text;
}

Error av_error(ErrorCode code, std::string_view what, int err) {
  return Error(code, std::string(what) + ": " + av_error_text(err));
}

FramePtr make_frame() {
  FramePtr f(av_frame_alloc());
  if (!f) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate a frame");
  return f;
}

PacketPtr make_packet() {
  PacketPtr p(av_packet_alloc());
  if (!p) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate a packet");
  return p;
}

FramePtr make_rgb_frame(int width, int height) {
  FramePtr f = make_frame();
  f->width = width;
  f->height = height;
  f->format = AV_PIX_FMT_RGB24;
  const int err = av_frame_get_buffer(f.get(), 64);
  if (err < 0) throw av_error(ErrorCode::kOutOfMemory, "cannot allocate an RGB frame", err);
  return f;
}

void copy_into(const std::uint8_t* rgb, int width, int height, AVFrame& frame) {
  const std::size_t row = static_cast<std::size_t>(width) * 3;
  for (int y = 0; y < height; ++y) {
    std::memcpy(frame.data[0] + static_cast<std::ptrdiff_t>(y) * frame.linesize[0],
                rgb + static_cast<std::size_t>(y) * row, row);
  }
}

void copy_out(const AVFrame& frame, std::uint8_t* rgb) {
  const std::size_t row = static_cast<std::size_t>(frame.width) * 3;
  for (int y = 0; y < frame.height; ++y) {
    std::memcpy(rgb + static_cast<std::size_t>(y) * row,
                frame.data[0] + static_cast<std::ptrdiff_t>(y) * frame.linesize[0], row);
  }
}

}  // namespace ferry::media::detail
