#include "core/media/image.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/partial_file.h"
#include "core/media/ffmpeg_util.h"

namespace ferry::media {
namespace {

using namespace detail;

[[noreturn]] void not_an_image(const std::string& name, const std::string& why) {
  throw Error(ErrorCode::kBadArgument,
              name + " is not an image Ferry can read (PNG, JPEG or WebP): " + why);
}

// The first decoded frame of `stream`.
FramePtr decode_first_frame(AVFormatContext* input, int stream, AVCodecContext* codec,
                            const std::string& name) {
  FramePtr frame = make_frame();
  PacketPtr packet = make_packet();
  bool flushed = false;
  while (true) {
    int err = avcodec_receive_frame(codec, frame.get());
    if (err == 0) return frame;
    if (err != AVERROR(EAGAIN) || flushed) {
      not_an_image(name, err == AVERROR_EOF ? "it holds no picture" : av_error_text(err));
    }
    err = av_read_frame(input, packet.get());
    if (err == AVERROR_EOF) {
      flushed = true;
      avcodec_send_packet(codec, nullptr);
      continue;
    }
    if (err < 0) not_an_image(name, av_error_text(err));
    if (packet->stream_index == stream) {
      err = avcodec_send_packet(codec, packet.get());
      av_packet_unref(packet.get());
      if (err < 0 && err != AVERROR(EAGAIN)) not_an_image(name, av_error_text(err));
    } else {
      av_packet_unref(packet.get());
    }
  }
}

// Any FFmpeg frame → packed RGB24 through swscale (into a padded frame, then copied out).
RgbImage to_rgb(const AVFrame& frame, int width, int height, int flags) {
  RgbImage out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  SwsPtr sws(sws_getContext(frame.width, frame.height, static_cast<AVPixelFormat>(frame.format),
                            width, height, AV_PIX_FMT_RGB24, flags, nullptr, nullptr, nullptr));
  if (!sws)
    throw Error(ErrorCode::kUnsupported, "FFmpeg cannot convert this image's pixels to RGB");
  FramePtr rgb = make_rgb_frame(width, height);
  sws_scale(sws.get(), frame.data, frame.linesize, 0, frame.height, rgb->data, rgb->linesize);
  copy_out(*rgb, out.rgb.data());
  return out;
}

}  // namespace

RgbImage load_image(const std::filesystem::path& path) {
  quiet_ffmpeg_logs();
  const std::string name = io::detail::display(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw Error(ErrorCode::kIo, "cannot open the image " + name + ": no such file");
  }
  AVFormatContext* raw = nullptr;
  const std::string utf8 = name;  // FFmpeg takes UTF-8 paths on every platform
  int err = avformat_open_input(&raw, utf8.c_str(), nullptr, nullptr);
  if (err == AVERROR(ENOENT) || err == AVERROR(EACCES)) {
    throw av_error(ErrorCode::kIo, "cannot open the image " + name, err);
  }
  if (err < 0) not_an_image(name, av_error_text(err));
  InputPtr input(raw);
  if ((err = avformat_find_stream_info(input.get(), nullptr)) < 0) {
    not_an_image(name, av_error_text(err));
  }
  const AVCodec* decoder = nullptr;
  const int stream = av_find_best_stream(input.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
  if (stream < 0 || decoder == nullptr) not_an_image(name, "it holds no picture");
  const AVCodecParameters* params = input->streams[stream]->codecpar;
  if (params->width <= 0 || params->height <= 0) not_an_image(name, "it has no size");
  if (params->width > kMaxImageSide || params->height > kMaxImageSide) {
    throw Error(ErrorCode::kBadArgument, name + " is " + std::to_string(params->width) + "x" +
                                             std::to_string(params->height) +
                                             " pixels; start images may be at most " +
                                             std::to_string(kMaxImageSide) + " on a side");
  }

  CodecPtr codec(avcodec_alloc_context3(decoder));
  if (!codec) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate a decoder");
  if ((err = avcodec_parameters_to_context(codec.get(), params)) < 0 ||
      (err = avcodec_open2(codec.get(), decoder, nullptr)) < 0) {
    not_an_image(name, av_error_text(err));
  }
  const FramePtr frame = decode_first_frame(input.get(), stream, codec.get(), name);
  if (frame->width <= 0 || frame->height <= 0 || frame->width > kMaxImageSide ||
      frame->height > kMaxImageSide) {
    not_an_image(name, "its picture has no usable size");
  }
  return to_rgb(*frame, frame->width, frame->height, SWS_BICUBIC | SWS_ACCURATE_RND);
}

RgbImage resize_and_center_crop(const RgbImage& image, int width, int height) {
  if (image.empty() || width <= 0 || height <= 0) {
    throw Error(ErrorCode::kBadArgument, "cannot resize an empty image or to an empty size");
  }
  // Cover the target, then crop the middle (the official: scale = max(ow/iw, oh/ih), rounded).
  const double scale = std::max(static_cast<double>(width) / image.width,
                                static_cast<double>(height) / image.height);
  const int scaled_w = std::max(width, static_cast<int>(std::lround(image.width * scale)));
  const int scaled_h = std::max(height, static_cast<int>(std::lround(image.height * scale)));

  FramePtr src = make_rgb_frame(image.width, image.height);
  copy_into(image.rgb.data(), image.width, image.height, *src);
  const RgbImage scaled =
      to_rgb(*src, scaled_w, scaled_h, SWS_LANCZOS | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT);

  RgbImage out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  const int left = (scaled_w - width) / 2;
  const int top = (scaled_h - height) / 2;
  for (int y = 0; y < height; ++y) {
    const std::size_t from = (static_cast<std::size_t>(top + y) * scaled_w + left) * 3;
    std::memcpy(out.rgb.data() + static_cast<std::size_t>(y) * width * 3, scaled.rgb.data() + from,
                static_cast<std::size_t>(width) * 3);
  }
  return out;
}

void save_png(const RgbImage& image, const std::filesystem::path& path) {
  quiet_ffmpeg_logs();
  if (image.empty() ||
      image.rgb.size() != static_cast<std::size_t>(image.width) * image.height * 3) {
    throw Error(ErrorCode::kInternal, "save_png: the image's size and pixels disagree");
  }
  const AVCodec* encoder = avcodec_find_encoder(AV_CODEC_ID_PNG);
  if (encoder == nullptr) throw Error(ErrorCode::kUnsupported, "this FFmpeg has no PNG encoder");
  CodecPtr codec(avcodec_alloc_context3(encoder));
  if (!codec) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate an encoder");
  codec->width = image.width;
  codec->height = image.height;
  codec->pix_fmt = AV_PIX_FMT_RGB24;
  codec->time_base = AVRational{1, 1};
  int err = avcodec_open2(codec.get(), encoder, nullptr);
  if (err < 0) throw av_error(ErrorCode::kUnsupported, "cannot start the PNG encoder", err);

  FramePtr frame = make_rgb_frame(image.width, image.height);
  copy_into(image.rgb.data(), image.width, image.height, *frame);
  PacketPtr packet = make_packet();
  if ((err = avcodec_send_frame(codec.get(), frame.get())) < 0 ||
      (err = avcodec_receive_packet(codec.get(), packet.get())) < 0) {
    throw av_error(ErrorCode::kInternal, "PNG encoding failed", err);
  }
  io::write_file_atomically(
      path, std::as_bytes(std::span(packet->data, static_cast<std::size_t>(packet->size))));
}

}  // namespace ferry::media
