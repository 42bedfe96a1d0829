#include "gui/audio_output.h"

#include <QAudioDevice>
#include <QAudioFormat>
#include <QAudioSink>
#include <QBuffer>
#include <QMediaDevices>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace ferry::gui {

namespace {

// The track's format if the device takes it (16-bit first: every device does), else the
// device's own rate and channel count, converted to.
QAudioFormat formatFor(const QAudioDevice& device, const media::AudioTrack& track) {
  QAudioFormat format;
  format.setSampleRate(track.sample_rate);
  format.setChannelCount(track.channels);
  for (const auto sampleFormat : {QAudioFormat::Int16, QAudioFormat::Float}) {
    format.setSampleFormat(sampleFormat);
    if (device.isFormatSupported(format)) return format;
  }
  format = device.preferredFormat();
  if (format.sampleFormat() != QAudioFormat::Float) format.setSampleFormat(QAudioFormat::Int16);
  return format;
}

float sampleAt(const media::AudioTrack& track, double frame, int channel) {
  const std::int64_t last = track.frames() - 1;
  const auto f0 = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(frame)), 0, last);
  const std::int64_t f1 = std::min(f0 + 1, last);
  const double t = std::clamp(frame - static_cast<double>(f0), 0.0, 1.0);
  const float a = track.samples[static_cast<std::size_t>(f0 * track.channels + channel)];
  const float b = track.samples[static_cast<std::size_t>(f1 * track.channels + channel)];
  return static_cast<float>(a + (b - a) * t);
}

}  // namespace

QByteArray pcmForDevice(const media::AudioTrack& track, std::int64_t from, int rate, int channels,
                        bool asFloat) {
  if (track.empty() || from >= track.frames() || rate <= 0 || channels <= 0) return {};
  const double step = static_cast<double>(track.sample_rate) / rate;  // track frames per output
  const auto outFrames =
      static_cast<std::int64_t>(std::floor(static_cast<double>(track.frames() - from) / step));
  const int bytesPerSample = asFloat ? 4 : 2;
  QByteArray pcm(static_cast<qsizetype>(outFrames * channels * bytesPerSample), Qt::Uninitialized);
  char* out = pcm.data();
  for (std::int64_t i = 0; i < outFrames; ++i) {
    const double frame = static_cast<double>(from) + static_cast<double>(i) * step;
    for (int c = 0; c < channels; ++c) {
      const float v = std::clamp(sampleAt(track, frame, c % track.channels), -1.0f, 1.0f);
      if (asFloat) {
        std::memcpy(out, &v, 4);
      } else {
        const auto s = static_cast<std::int16_t>(std::lround(v * 32767.0f));
        std::memcpy(out, &s, 2);
      }
      out += bytesPerSample;
    }
  }
  return pcm;
}

SystemAudioOutput::SystemAudioOutput() = default;

SystemAudioOutput::~SystemAudioOutput() {
  stop();
}

bool SystemAudioOutput::start(std::shared_ptr<const media::AudioTrack> track, std::int64_t from) {
  stop();
  if (!track || track->empty()) return false;
  const QAudioDevice device = QMediaDevices::defaultAudioOutput();
  if (device.isNull()) return false;
  const QAudioFormat format = formatFor(device, *track);
  pcm_ = pcmForDevice(*track, from, format.sampleRate(), format.channelCount(),
                      format.sampleFormat() == QAudioFormat::Float);
  if (pcm_.isEmpty()) return false;
  from_ = from;
  trackFrames_ = track->frames();
  pcmUs_ = static_cast<qint64>(static_cast<double>(pcm_.size()) / format.bytesPerFrame() * 1e6 /
                               format.sampleRate());
  trackRate_ = track->sample_rate;
  buffer_ = std::make_unique<QBuffer>(&pcm_);
  buffer_->open(QIODevice::ReadOnly);
  sink_ = std::make_unique<QAudioSink>(device, format);
  sink_->setVolume(volume_);
  sink_->start(buffer_.get());
  if (sink_->error() != QAudio::NoError) {
    stop();
    return false;
  }
  return true;
}

void SystemAudioOutput::stop() {
  if (sink_) sink_->stop();
  sink_.reset();
  buffer_.reset();
  pcm_.clear();
}

std::int64_t SystemAudioOutput::position() const {
  if (!sink_) return from_;
  // What the device has played, in the track's frames (the rate may differ). The sink goes idle
  // as soon as it has read the whole buffer, while the device still plays its last part: the
  // track is done when the played time reaches the buffer's (within 2 ms of rounding).
  const qint64 playedUs = sink_->processedUSecs();
  if (sink_->state() == QAudio::IdleState && buffer_->atEnd() && playedUs + 2000 >= pcmUs_) {
    return trackFrames_;
  }
  const auto played = static_cast<std::int64_t>(static_cast<double>(playedUs) * trackRate_ / 1e6);
  return std::min(from_ + played, trackFrames_);
}

void SystemAudioOutput::setVolume(double volume) {
  volume_ = std::clamp(volume, 0.0, 1.0);
  if (sink_) sink_->setVolume(volume_);
}

}  // namespace ferry::gui
