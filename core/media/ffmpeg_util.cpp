#include "core/media/ffmpeg_util.h"

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

}  // namespace ferry::media::detail
