// Where the player's soundtrack is heard, behind a small interface: the app plays through the
// system's default output (Qt Multimedia's QAudioSink), the tests through a device whose clock
// they set. The player takes its time from the device while it plays (the audio clock drives the
// frame shown), so a device that runs slow or late never lets the picture drift from the sound.
//
// Why QAudioSink: it is Qt's own PCM output (PulseAudio/ALSA on Linux, WASAPI on Windows), so
// it adds no library to build, license or keep up; Ferry decodes the soundtrack itself (core's
// read_audio), so none of Qt Multimedia's playback backends is used. The MSI ships
// Qt6Multimedia.dll and the Windows (WMF) media plugin it opens its devices through, never the
// FFmpeg media plugin, which would bring its own FFmpeg DLLs beside Ferry's (installer/).
#pragma once

#include <QByteArray>
#include <cstdint>
#include <memory>

#include "core/media/audio.h"

class QAudioSink;
class QBuffer;

namespace ferry::gui {

class AudioOutput {
 public:
  virtual ~AudioOutput() = default;
  // Plays `track` from its sample frame `from` on. false when nothing can play it (no device, a
  // format the device refuses): the player then keeps time by the wall clock, silently.
  virtual bool start(std::shared_ptr<const media::AudioTrack> track, std::int64_t from) = 0;
  // Stops (the player's pause and seek); start() resumes from where the player says.
  virtual void stop() = 0;
  // The track's sample frame heard now, between start() and stop(); the track's frame count once
  // it has all been played.
  virtual std::int64_t position() const = 0;
  // Linear gain in [0, 1]; mute is 0. Kept across start() and stop().
  virtual void setVolume(double volume) = 0;
};

// The system's default output, through QAudioSink.
class SystemAudioOutput final : public AudioOutput {
 public:
  SystemAudioOutput();
  ~SystemAudioOutput() override;
  bool start(std::shared_ptr<const media::AudioTrack> track, std::int64_t from) override;
  void stop() override;
  std::int64_t position() const override;
  void setVolume(double volume) override;

 private:
  std::unique_ptr<QAudioSink> sink_;
  std::unique_ptr<QBuffer> buffer_;
  QByteArray pcm_;  // the track from `from_` on, in the device's format
  std::int64_t from_ = 0;
  std::int64_t trackFrames_ = 0;
  int trackRate_ = 0;
  qint64 pcmUs_ = 0;  // the buffer's duration
  double volume_ = 1.0;
};

// The track's frames [from, end) as the device wants them: `rate` (linear interpolation when it
// differs), `channels` (the track's channel c % its count), 16-bit integers or 32-bit floats.
QByteArray pcmForDevice(const media::AudioTrack& track, std::int64_t from, int rate, int channels,
                        bool asFloat);

}  // namespace ferry::gui
