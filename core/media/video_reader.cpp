#include "core/media/video_reader.h"

#include <cerrno>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/media/ffmpeg_util.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace ferry::media {
namespace {

using namespace detail;

struct OpenVideo {
  InputPtr input;
  int stream = -1;
  const AVCodec* decoder = nullptr;
  std::string name;
};

[[noreturn]] void not_a_video(const std::string& name, const std::string& why) {
  throw Error(ErrorCode::kBadArgument, name + " is not a video Ferry can read: " + why);
}

OpenVideo open_video(const std::filesystem::path& path) {
  quiet_ffmpeg_logs();
  OpenVideo v;
  v.name = io::detail::display(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kIo, "cannot open the video " + v.name + ": no such file");
  }
  AVFormatContext* raw = nullptr;
  int err = avformat_open_input(&raw, v.name.c_str(), nullptr, nullptr);
  if (err == AVERROR(ENOENT) || err == AVERROR(EACCES)) {
    throw av_error(ErrorCode::kIo, "cannot open the video " + v.name, err);
  }
  if (err < 0) not_a_video(v.name, av_error_text(err));
  v.input.reset(raw);
  if ((err = avformat_find_stream_info(v.input.get(), nullptr)) < 0) {
    not_a_video(v.name, av_error_text(err));
  }
  v.stream = av_find_best_stream(v.input.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &v.decoder, 0);
  if (v.stream < 0 || v.decoder == nullptr) not_a_video(v.name, "it has no video stream");
  return v;
}

}  // namespace

VideoInfo probe_video(const std::filesystem::path& path) {
  OpenVideo v = open_video(path);
  const AVStream* s = v.input->streams[v.stream];
  VideoInfo info;
  info.width = s->codecpar->width;
  info.height = s->codecpar->height;
  info.fps = s->avg_frame_rate.den != 0 ? av_q2d(s->avg_frame_rate) : 0.0;
  info.codec = avcodec_get_name(s->codecpar->codec_id);
  const char* pix = av_get_pix_fmt_name(static_cast<AVPixelFormat>(s->codecpar->format));
  info.pixel_format = pix != nullptr ? pix : "";
  const AVDictionaryEntry* tag = nullptr;
  while ((tag = av_dict_get(v.input->metadata, "", tag, AV_DICT_IGNORE_SUFFIX)) != nullptr) {
    info.metadata[tag->key] = tag->value;
  }
  PacketPtr packet = make_packet();
  int err;
  while ((err = av_read_frame(v.input.get(), packet.get())) == 0) {
    if (packet->stream_index == v.stream) ++info.frames;
    av_packet_unref(packet.get());
  }
  if (err != AVERROR_EOF) not_a_video(v.name, av_error_text(err));
  return info;
}

std::vector<RgbImage> read_video_frames(const std::filesystem::path& path,
                                        std::int64_t max_frames) {
  OpenVideo v = open_video(path);
  CodecPtr codec(avcodec_alloc_context3(v.decoder));
  if (!codec) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate a decoder");
  int err;
  if ((err = avcodec_parameters_to_context(codec.get(), v.input->streams[v.stream]->codecpar)) <
          0 ||
      (err = avcodec_open2(codec.get(), v.decoder, nullptr)) < 0) {
    not_a_video(v.name, av_error_text(err));
  }
  std::vector<RgbImage> frames;
  FramePtr frame = make_frame();
  PacketPtr packet = make_packet();
  SwsPtr sws;
  FramePtr rgb;  // swscale's padded output, copied out per frame
  const auto drain = [&] {
    while (avcodec_receive_frame(codec.get(), frame.get()) == 0) {
      if (static_cast<std::int64_t>(frames.size()) >= max_frames) {
        not_a_video(v.name, "it has more than " + std::to_string(max_frames) + " frames");
      }
      RgbImage& out = frames.emplace_back();
      out.width = frame->width;
      out.height = frame->height;
      out.rgb.resize(static_cast<std::size_t>(out.width) * out.height * 3);
      sws.reset(sws_getCachedContext(sws.release(), frame->width, frame->height,
                                     static_cast<AVPixelFormat>(frame->format), out.width,
                                     out.height, AV_PIX_FMT_RGB24, SWS_BICUBIC | SWS_ACCURATE_RND,
                                     nullptr, nullptr, nullptr));
      if (!sws) throw Error(ErrorCode::kUnsupported, "FFmpeg cannot convert the video to RGB");
      // The stream's own matrix and range (Ferry writes limited-range BT.709).
      const int* matrix = sws_getCoefficients(
          frame->colorspace == AVCOL_SPC_BT709 ? SWS_CS_ITU709 : SWS_CS_DEFAULT);
      sws_setColorspaceDetails(sws.get(), matrix, frame->color_range == AVCOL_RANGE_JPEG,
                               sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
      if (!rgb || rgb->width != out.width || rgb->height != out.height) {
        rgb = make_rgb_frame(out.width, out.height);
      }
      sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, rgb->data,
                rgb->linesize);
      copy_out(*rgb, out.rgb.data());
    }
  };
  while ((err = av_read_frame(v.input.get(), packet.get())) == 0) {
    if (packet->stream_index == v.stream) {
      err = avcodec_send_packet(codec.get(), packet.get());
      if (err < 0 && err != AVERROR(EAGAIN)) not_a_video(v.name, av_error_text(err));
      drain();
    }
    av_packet_unref(packet.get());
  }
  avcodec_send_packet(codec.get(), nullptr);
  drain();
  return frames;
}

}  // namespace ferry::media
