#include "core/media/video_reader.h"

#include <cerrno>
#include <functional>
#include <string>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/media/ffmpeg_util.h"

extern "C" {
#include <libavutil/pixdesc.h>
#include <libavutil/samplefmt.h>
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
  info.seconds = s->duration > 0 ? static_cast<double>(s->duration) * av_q2d(s->time_base) : 0.0;
  const int audio = av_find_best_stream(v.input.get(), AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
  if (audio >= 0) {
    const AVStream* a = v.input->streams[audio];
    info.audio_codec = avcodec_get_name(a->codecpar->codec_id);
    info.audio_sample_rate = a->codecpar->sample_rate;
    info.audio_channels = a->codecpar->ch_layout.nb_channels;
    info.audio_seconds =
        a->duration > 0 ? static_cast<double>(a->duration) * av_q2d(a->time_base) : 0.0;
  }
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
  if (info.seconds == 0 && info.fps > 0) info.seconds = static_cast<double>(info.frames) / info.fps;
  return info;
}

namespace {

// One decoded audio frame appended to `track` as interleaved f32.
void append_samples(const AVFrame& frame, const std::string& name, AudioTrack& track) {
  const int channels = frame.ch_layout.nb_channels;
  const auto format = static_cast<AVSampleFormat>(frame.format);
  const bool planar = av_sample_fmt_is_planar(format) != 0;
  const AVSampleFormat packed = av_get_packed_sample_fmt(format);
  if (packed != AV_SAMPLE_FMT_FLT && packed != AV_SAMPLE_FMT_S16) {
    throw Error(ErrorCode::kUnsupported, "the soundtrack of " + name + " is " +
                                             av_get_sample_fmt_name(format) +
                                             ", which Ferry does not convert");
  }
  const std::size_t start = track.samples.size();
  track.samples.resize(start + static_cast<std::size_t>(frame.nb_samples) * channels);
  for (int i = 0; i < frame.nb_samples; ++i) {
    for (int c = 0; c < channels; ++c) {
      const int plane = planar ? c : 0;
      const int index = planar ? i : i * channels + c;
      const float v =
          packed == AV_SAMPLE_FMT_FLT
              ? reinterpret_cast<const float*>(frame.extended_data[plane])[index]
              : reinterpret_cast<const std::int16_t*>(frame.extended_data[plane])[index] / 32768.0f;
      track.samples[start + static_cast<std::size_t>(i) * channels + c] = v;
    }
  }
}

// A decoder for `stream` of `v`, opened with the stream's parameters.
CodecPtr open_decoder(const OpenVideo& v, int stream, const AVCodec* decoder) {
  CodecPtr codec(avcodec_alloc_context3(decoder));
  if (!codec) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate a decoder");
  int err;
  if ((err = avcodec_parameters_to_context(codec.get(), v.input->streams[stream]->codecpar)) < 0 ||
      (err = avcodec_open2(codec.get(), decoder, nullptr)) < 0) {
    not_a_video(v.name, av_error_text(err));
  }
  return codec;
}

// Every frame of `stream`, decoded by `codec` in order (the decoder flushed at the end of the
// file), handed to `take`.
void decode_stream(const OpenVideo& v, int stream, AVCodecContext& codec,
                   const std::function<void(const AVFrame&)>& take) {
  FramePtr frame = make_frame();
  PacketPtr packet = make_packet();
  const auto drain = [&] {
    while (avcodec_receive_frame(&codec, frame.get()) == 0) {
      take(*frame);
      av_frame_unref(frame.get());
    }
  };
  while (av_read_frame(v.input.get(), packet.get()) == 0) {
    if (packet->stream_index == stream) {
      const int err = avcodec_send_packet(&codec, packet.get());
      if (err < 0 && err != AVERROR(EAGAIN)) not_a_video(v.name, av_error_text(err));
      drain();
    }
    av_packet_unref(packet.get());
  }
  avcodec_send_packet(&codec, nullptr);
  drain();
}

// Decoded video frames to RGB, swscale's context and padded output kept from frame to frame.
class RgbConverter {
 public:
  RgbImage operator()(const AVFrame& frame) {
    RgbImage out;
    out.width = frame.width;
    out.height = frame.height;
    out.rgb.resize(static_cast<std::size_t>(out.width) * out.height * 3);
    sws_.reset(sws_getCachedContext(sws_.release(), frame.width, frame.height,
                                    static_cast<AVPixelFormat>(frame.format), out.width, out.height,
                                    AV_PIX_FMT_RGB24, SWS_BICUBIC | SWS_ACCURATE_RND, nullptr,
                                    nullptr, nullptr));
    if (!sws_) throw Error(ErrorCode::kUnsupported, "FFmpeg cannot convert the video to RGB");
    // The stream's own matrix and range (Ferry writes limited-range BT.709).
    const int* matrix =
        sws_getCoefficients(frame.colorspace == AVCOL_SPC_BT709 ? SWS_CS_ITU709 : SWS_CS_DEFAULT);
    sws_setColorspaceDetails(sws_.get(), matrix, frame.color_range == AVCOL_RANGE_JPEG,
                             sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    if (!rgb_ || rgb_->width != out.width || rgb_->height != out.height) {
      rgb_ = make_rgb_frame(out.width, out.height);
    }
    sws_scale(sws_.get(), frame.data, frame.linesize, 0, frame.height, rgb_->data, rgb_->linesize);
    copy_out(*rgb_, out.rgb.data());
    return out;
  }

 private:
  SwsPtr sws_;
  FramePtr rgb_;  // swscale's padded output, copied out per frame
};

}  // namespace

AudioTrack read_audio(const std::filesystem::path& path) {
  OpenVideo v = open_video(path);
  const AVCodec* decoder = nullptr;
  const int stream = av_find_best_stream(v.input.get(), AVMEDIA_TYPE_AUDIO, -1, -1, &decoder, 0);
  AudioTrack track;
  if (stream < 0) return track;
  if (decoder == nullptr) not_a_video(v.name, "no decoder for its soundtrack");
  const CodecPtr codec = open_decoder(v, stream, decoder);
  track.sample_rate = codec->sample_rate;
  track.channels = codec->ch_layout.nb_channels;
  decode_stream(v, stream, *codec,
                [&](const AVFrame& frame) { append_samples(frame, v.name, track); });
  return track;
}

std::vector<RgbImage> read_video_frames(const std::filesystem::path& path,
                                        std::int64_t max_frames) {
  OpenVideo v = open_video(path);
  const CodecPtr codec = open_decoder(v, v.stream, v.decoder);
  std::vector<RgbImage> frames;
  RgbConverter to_rgb;
  decode_stream(v, v.stream, *codec, [&](const AVFrame& frame) {
    if (static_cast<std::int64_t>(frames.size()) >= max_frames) {
      not_a_video(v.name, "it has more than " + std::to_string(max_frames) + " frames");
    }
    frames.push_back(to_rgb(frame));
  });
  return frames;
}

}  // namespace ferry::media
