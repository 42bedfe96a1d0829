#include "core/media/video_writer.h"

#include <algorithm>
#include <string>
#include <vector>

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/cpu.h>
#include <libavutil/opt.h>
}

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/partial_file.h"
#include "core/media/ffmpeg_util.h"

namespace ferry::media {
namespace {

using namespace detail;

const std::vector<std::string> kDefaultEncoders = {"libx264", "h264_nvenc", "h264_mf", "mpeg4"};

struct OutputCloser {
  void operator()(AVFormatContext* c) const {
    if (c->pb != nullptr) avio_closep(&c->pb);
    avformat_free_context(c);
  }
};
using OutputPtr = std::unique_ptr<AVFormatContext, OutputCloser>;

// x264's CPU paths capped at AVX2 where the CPU has AVX2 (every AVX-512 CPU has it); else x264's
// own choice. On its AVX-512 paths x264 (core 164, Debian 12's FFmpeg 5.1) is not reproducible:
// the same frames, even on one thread, gave different bitstreams from one write to the next
// (96x64, 9 frames: 33 of 40 writes in one process unlike the first, 30 of 40 on one thread;
// 848x480, 49 frames: 1 in 3), and sizes unlike its C code's. Capped, every write gave the C
// code's bitstream byte for byte (also the SSE4.2 path's), for about 5% more encoder CPU time
// (848x480, 3 x 49 frames: 3.1-3.3 s user against 3.0-3.1 s).
void make_x264_reproducible(AVCodecContext* codec) {
  const int cpu = av_get_cpu_flags();
  const int avx2 = AV_CPU_FLAG_AVX2 | AV_CPU_FLAG_FMA3 | AV_CPU_FLAG_BMI2;
  if ((cpu & avx2) == avx2) av_opt_set(codec->priv_data, "x264-params", "asm=AVX2,Cache64", 0);
}

// Constant quality for each encoder family, so the same request gives the same file.
void set_quality(AVCodecContext* codec, const std::string& name, int crf) {
  if (name == "libx264") {
    av_opt_set(codec->priv_data, "preset", "medium", 0);
    av_opt_set_int(codec->priv_data, "crf", crf, 0);
    make_x264_reproducible(codec);
  } else if (name == "h264_nvenc") {
    av_opt_set(codec->priv_data, "rc", "vbr", 0);
    av_opt_set_int(codec->priv_data, "cq", crf + 2, 0);
  } else if (name == "h264_mf") {
    codec->bit_rate = static_cast<std::int64_t>(codec->width) * codec->height * 4;
  } else {  // mpeg4: fixed quantiser 2, the best it has
    codec->flags |= AV_CODEC_FLAG_QSCALE;
    codec->global_quality = FF_QP2LAMBDA * 2;
  }
}

}  // namespace

std::string_view video_extension() {
  return ".mp4";
}

struct VideoWriter::Impl {
  explicit Impl(const std::filesystem::path& path) : file(path), name(io::detail::display(path)) {}

  // Declared first, destroyed last: the file is closed before its partial name is removed.
  io::PartialFile file;
  std::string name;
  OutputPtr output;
  CodecPtr codec;
  AVStream* stream = nullptr;
  SwsPtr sws;
  FramePtr rgb;  // the frame being written, in a padded buffer swscale may over-read
  FramePtr yuv;
  PacketPtr packet;
  std::string encoder;
  std::int64_t frames = 0;
  int width = 0, height = 0;
  int fps = 0;
  bool failed = false;
  bool finished = false;
  // The soundtrack, its encoder and stream, and how many of its frames were sent.
  AudioTrack audio;
  CodecPtr audio_codec;
  AVStream* audio_stream = nullptr;
  FramePtr audio_frame;
  std::int64_t audio_sent = 0;
  std::filesystem::path wav;  // the user's export (VideoSettings::soundtrack_wav)

  [[noreturn]] void write_failed(int err) {
    failed = true;
    throw av_error(ErrorCode::kIo, "writing " + name + " failed (is the disk full?)", err);
  }

  // Sends `frame` (nullptr: end of stream) to `codec` and writes every packet it has ready.
  void encode(AVCodecContext* into, AVStream* to, const AVFrame* frame) {
    int err = avcodec_send_frame(into, frame);
    if (err < 0) throw av_error(ErrorCode::kInternal, "an encoder refused a frame", err);
    while ((err = avcodec_receive_packet(into, packet.get())) == 0) {
      av_packet_rescale_ts(packet.get(), into->time_base, to->time_base);
      packet->stream_index = to->index;
      err = av_interleaved_write_frame(output.get(), packet.get());
      if (err < 0) write_failed(err);
      if (output->pb->error < 0) write_failed(output->pb->error);
    }
    if (err != AVERROR(EAGAIN) && err != AVERROR_EOF) {
      throw av_error(ErrorCode::kInternal, "an encoder failed", err);
    }
  }
  void encode(const AVFrame* frame) { encode(codec.get(), stream, frame); }

  // The AAC encoder and its stream, before the header is written.
  void open_audio(const AudioTrack& track, int bit_rate) {
    check_audio_track(track, "the soundtrack");
    const AVCodec* aac = avcodec_find_encoder_by_name("aac");
    if (aac == nullptr) throw Error(ErrorCode::kUnsupported, "this FFmpeg has no AAC encoder");
    audio_codec.reset(avcodec_alloc_context3(aac));
    if (!audio_codec) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate an encoder");
    AVCodecContext& a = *audio_codec;
    a.sample_fmt = AV_SAMPLE_FMT_FLTP;
    a.sample_rate = track.sample_rate;
    av_channel_layout_default(&a.ch_layout, track.channels);
    a.bit_rate = bit_rate;
    a.time_base = AVRational{1, track.sample_rate};
    if (output->oformat->flags & AVFMT_GLOBALHEADER) a.flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int err = avcodec_open2(&a, aac, nullptr);
    if (err < 0) throw av_error(ErrorCode::kUnsupported, "the AAC encoder did not start", err);
    audio_stream = avformat_new_stream(output.get(), nullptr);
    if (audio_stream == nullptr)
      throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not add a stream");
    if ((err = avcodec_parameters_from_context(audio_stream->codecpar, &a)) < 0) {
      throw av_error(ErrorCode::kInternal, "cannot describe the audio stream", err);
    }
    audio_stream->time_base = a.time_base;
    audio_frame = make_frame();
    audio_frame->format = a.sample_fmt;
    audio_frame->sample_rate = a.sample_rate;
    audio_frame->nb_samples = a.frame_size;
    if ((err = av_channel_layout_copy(&audio_frame->ch_layout, &a.ch_layout)) < 0 ||
        (err = av_frame_get_buffer(audio_frame.get(), 0)) < 0) {
      throw av_error(ErrorCode::kOutOfMemory, "cannot allocate an audio frame", err);
    }
    audio = track;
  }

  // The soundtrack's frames [0, n) for `frames` video frames: up to the end of the last one.
  std::int64_t audio_until(std::int64_t video_frames) const {
    return std::min(audio.frames(), video_frames * audio.sample_rate / fps);
  }

  // Encodes the soundtrack up to audio frame `until`: whole encoder frames, and the rest too
  // when `last` (the end of the video).
  void feed_audio(std::int64_t until, bool last) {
    if (!audio_codec) return;
    const std::int64_t size = audio_codec->frame_size;
    while (audio_sent < until && (last || until - audio_sent >= size)) {
      const int n = static_cast<int>(std::min(size, until - audio_sent));
      const int err = av_frame_make_writable(audio_frame.get());
      if (err < 0) throw av_error(ErrorCode::kOutOfMemory, "cannot reuse the audio frame", err);
      audio_frame->nb_samples = n;
      for (int c = 0; c < audio.channels; ++c) {
        auto* plane = reinterpret_cast<float*>(audio_frame->data[c]);
        for (int i = 0; i < n; ++i) {
          plane[i] = audio.samples[static_cast<std::size_t>((audio_sent + i) * audio.channels + c)];
        }
      }
      audio_frame->pts = audio_sent;
      encode(audio_codec.get(), audio_stream, audio_frame.get());
      audio_sent += n;
    }
  }
};

VideoWriter::VideoWriter(const std::filesystem::path& path, const VideoSettings& settings)
    : impl_(std::make_unique<Impl>(path)) {
  quiet_ffmpeg_logs();
  Impl& m = *impl_;
  if (settings.width <= 0 || settings.height <= 0 || settings.width % 2 != 0 ||
      settings.height % 2 != 0 || settings.width > 8192 || settings.height > 8192) {
    throw Error(ErrorCode::kBadArgument,
                "a video must be even-sized and at most 8192 on a side, not " +
                    std::to_string(settings.width) + "x" + std::to_string(settings.height));
  }
  if (settings.fps < 1 || settings.fps > 120) {
    throw Error(ErrorCode::kBadArgument,
                "the frame rate must be 1 to 120, not " + std::to_string(settings.fps));
  }
  check_wav_export(settings.soundtrack_wav, settings.audio);
  m.width = settings.width;
  m.height = settings.height;
  m.fps = settings.fps;
  m.wav = settings.soundtrack_wav;

  AVFormatContext* raw = nullptr;
  const std::string partial = io::detail::display(m.file.partial_path());
  int err = avformat_alloc_output_context2(&raw, nullptr, "mp4", partial.c_str());
  if (err < 0 || raw == nullptr) throw av_error(ErrorCode::kUnsupported, "no MP4 muxer", err);
  m.output.reset(raw);

  std::string tried;
  const auto& names = settings.encoders.empty() ? kDefaultEncoders : settings.encoders;
  for (const std::string& name : names) {
    const AVCodec* encoder = avcodec_find_encoder_by_name(name.c_str());
    if (encoder == nullptr) continue;
    CodecPtr codec(avcodec_alloc_context3(encoder));
    if (!codec) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not allocate an encoder");
    codec->width = settings.width;
    codec->height = settings.height;
    codec->time_base = AVRational{1, settings.fps};
    codec->framerate = AVRational{settings.fps, 1};
    codec->pix_fmt = AV_PIX_FMT_YUV420P;
    codec->color_range = AVCOL_RANGE_MPEG;
    codec->colorspace = AVCOL_SPC_BT709;
    codec->color_primaries = AVCOL_PRI_BT709;
    codec->color_trc = AVCOL_TRC_BT709;
    codec->gop_size = settings.fps * 2;
    if (m.output->oformat->flags & AVFMT_GLOBALHEADER) {
      codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    }
    set_quality(codec.get(), name, settings.crf);
    err = avcodec_open2(codec.get(), encoder, nullptr);
    if (err == 0) {
      m.codec = std::move(codec);
      m.encoder = name;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + name + " (" + av_error_text(err) + ")";
  }
  if (!m.codec) {
    throw Error(ErrorCode::kUnsupported,
                "no video encoder could start" + (tried.empty() ? "" : ": " + tried));
  }

  m.stream = avformat_new_stream(m.output.get(), nullptr);
  if (m.stream == nullptr) throw Error(ErrorCode::kOutOfMemory, "FFmpeg could not add a stream");
  if ((err = avcodec_parameters_from_context(m.stream->codecpar, m.codec.get())) < 0) {
    throw av_error(ErrorCode::kInternal, "cannot describe the video stream", err);
  }
  m.stream->time_base = m.codec->time_base;
  m.stream->avg_frame_rate = m.codec->framerate;
  for (const auto& [key, value] : settings.metadata) {
    av_dict_set(&m.output->metadata, key.c_str(), value.c_str(), 0);
  }
  if (!settings.audio.empty()) m.open_audio(settings.audio, settings.audio_bit_rate);

  if ((err = avio_open(&m.output->pb, partial.c_str(), AVIO_FLAG_WRITE)) < 0) {
    throw av_error(ErrorCode::kIo, "cannot create " + m.name, err);
  }
  AVDictionary* options = nullptr;
  av_dict_set(&options, "movflags", "+faststart+use_metadata_tags", 0);
  err = avformat_write_header(m.output.get(), &options);
  av_dict_free(&options);
  if (err < 0) m.write_failed(err);

  // RGB (full range) → limited-range BT.709 YUV 4:2:0.
  m.sws.reset(sws_getContext(m.width, m.height, AV_PIX_FMT_RGB24, m.width, m.height,
                             AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_ACCURATE_RND, nullptr, nullptr,
                             nullptr));
  if (!m.sws) throw Error(ErrorCode::kUnsupported, "FFmpeg cannot convert RGB to YUV");
  const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
  sws_setColorspaceDetails(m.sws.get(), bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16);
  m.yuv = make_frame();
  m.yuv->width = m.width;
  m.yuv->height = m.height;
  m.yuv->format = AV_PIX_FMT_YUV420P;
  if ((err = av_frame_get_buffer(m.yuv.get(), 0)) < 0) {
    throw av_error(ErrorCode::kOutOfMemory, "cannot allocate a video frame", err);
  }
  m.packet = make_packet();
  m.rgb = make_rgb_frame(m.width, m.height);
}

VideoWriter::~VideoWriter() = default;

void VideoWriter::write(const RgbImage& frame) {
  Impl& m = *impl_;
  if (m.failed || m.finished) {
    throw Error(ErrorCode::kInternal, "VideoWriter::write after an error or finish()");
  }
  if (frame.width != m.width || frame.height != m.height ||
      frame.rgb.size() != static_cast<std::size_t>(m.width) * m.height * 3) {
    throw Error(ErrorCode::kInternal, "VideoWriter::write: a " + std::to_string(frame.width) + "x" +
                                          std::to_string(frame.height) + " frame for a " +
                                          std::to_string(m.width) + "x" + std::to_string(m.height) +
                                          " video");
  }
  int err = av_frame_make_writable(m.yuv.get());
  if (err < 0) throw av_error(ErrorCode::kOutOfMemory, "cannot reuse the video frame", err);
  copy_into(frame.rgb.data(), m.width, m.height, *m.rgb);
  sws_scale(m.sws.get(), m.rgb->data, m.rgb->linesize, 0, m.height, m.yuv->data, m.yuv->linesize);
  m.yuv->pts = m.frames;
  m.encode(m.yuv.get());
  ++m.frames;
  m.feed_audio(m.audio_until(m.frames), false);
}

void VideoWriter::finish() {
  Impl& m = *impl_;
  if (m.failed || m.finished) {
    throw Error(ErrorCode::kInternal, "VideoWriter::finish after an error or finish()");
  }
  m.encode(nullptr);
  if (m.audio_codec) {
    m.feed_audio(m.audio_until(m.frames), true);
    m.encode(m.audio_codec.get(), m.audio_stream, nullptr);
  }
  int err = av_write_trailer(m.output.get());
  if (err < 0) m.write_failed(err);
  err = avio_closep(&m.output->pb);
  if (err < 0) m.write_failed(err);
  if (m.wav.empty()) {
    m.file.commit();
  } else {
    commit_with_wavs({m.wav}, cut_to_video(m.audio, m.frames, m.fps), [&] { m.file.commit(); });
  }
  m.finished = true;
}

const std::string& VideoWriter::encoder() const {
  return impl_->encoder;
}
std::int64_t VideoWriter::frames_written() const {
  return impl_->frames;
}
std::int64_t VideoWriter::audio_frames_written() const {
  return impl_->audio_sent;
}

}  // namespace ferry::media
