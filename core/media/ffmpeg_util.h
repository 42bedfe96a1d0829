// What core/media's FFmpeg code shares: owners for FFmpeg's objects and its error codes turned into
// ferry::Error. Internal to core/media.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libswscale/swscale.h>
}

#include "core/error.h"

namespace ferry::media::detail {

struct FormatInputCloser {
  void operator()(AVFormatContext* c) const { avformat_close_input(&c); }
};
struct CodecContextFreer {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFreer {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFreer {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsFreer {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

using InputPtr = std::unique_ptr<AVFormatContext, FormatInputCloser>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecContextFreer>;
using FramePtr = std::unique_ptr<AVFrame, FrameFreer>;
using PacketPtr = std::unique_ptr<AVPacket, PacketFreer>;
using SwsPtr = std::unique_ptr<SwsContext, SwsFreer>;

// Silences FFmpeg's own logging (once per process); every entry point calls it.
void quiet_ffmpeg_logs();

// FFmpeg's text for an AVERROR code.
std::string av_error_text(int err);

// Error(code, "<what>: <FFmpeg's text>").
Error av_error(ErrorCode code, std::string_view what, int err);

// Allocations FFmpeg refused: Error(kOutOfMemory).
FramePtr make_frame();
PacketPtr make_packet();

// An RGB24 frame with FFmpeg's own aligned, padded buffer: swscale's SIMD paths read and write
// whole vectors past the end of a row, so it must never see a tightly sized RgbImage.
FramePtr make_rgb_frame(int width, int height);
// Row by row between an RgbImage and such a frame (same size).
void copy_into(const std::uint8_t* rgb, int width, int height, AVFrame& frame);
void copy_out(const AVFrame& frame, std::uint8_t* rgb);

}  // namespace ferry::media::detail
