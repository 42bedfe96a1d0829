// The player with sound (issue 20, Must show 4): the audio device's clock drives the frame shown,
// so play, pause, seek and loop keep sound and picture within one frame; mute and volume reach
// the device; the sound controls show only for a clip with sound, and a silent clip plays by the
// wall clock as before. The device is a virtual one whose clock the test sets (no sound card).
#include <QLabel>
#include <QSlider>
#include <QToolButton>
#include <QtTest/QtTest>
#include <cmath>
#include <cstring>

#include "gui/audio_output.h"
#include "gui/frame_player.h"

using namespace ferry::gui;
namespace media = ferry::media;

namespace {

constexpr int kRate = 32000;
constexpr double kFps = 24;

// A device whose clock the test sets: position() is what the test says has been heard.
class VirtualAudioOutput final : public AudioOutput {
 public:
  bool start(std::shared_ptr<const media::AudioTrack> track, std::int64_t from) override {
    track_ = std::move(track);
    from_ = from;
    heard_ = from;
    playing_ = true;
    ++starts_;
    return true;
  }
  void stop() override { playing_ = false; }
  std::int64_t position() const override { return heard_; }
  void setVolume(double volume) override { volume_ = volume; }

  void hear(std::int64_t frame) { heard_ = std::min(frame, track_->frames()); }
  bool playing() const { return playing_; }
  std::int64_t from() const { return from_; }
  int starts() const { return starts_; }
  double volume() const { return volume_; }

 private:
  std::shared_ptr<const media::AudioTrack> track_;
  std::int64_t from_ = -1;
  std::int64_t heard_ = 0;
  bool playing_ = false;
  int starts_ = 0;
  double volume_ = -1;
};

QVector<QImage> frames(int count) {
  QVector<QImage> out;
  for (int i = 0; i < count; ++i) {
    QImage image(8, 8, QImage::Format_RGB888);
    image.fill(QColor(i * 5, 255 - i * 5, 0));
    out.push_back(image);
  }
  return out;
}

std::shared_ptr<media::AudioTrack> sound(double seconds) {
  auto track = std::make_shared<media::AudioTrack>();
  track->sample_rate = kRate;
  track->channels = 2;
  track->samples.assign(static_cast<std::size_t>(seconds * kRate) * 2, 0.1f);
  return track;
}

// The first sample frame inside video frame `frame`.
std::int64_t sampleOf(int frame) {
  return static_cast<std::int64_t>(std::ceil(frame * kRate / kFps - 1e-6));
}

// Picture and sound within one frame: the frame shown is the one the heard sample is in.
bool inSync(const FramePlayer& player, std::int64_t heard) {
  const double gap = std::abs(player.currentFrame() / kFps - static_cast<double>(heard) / kRate);
  return gap < 1.0 / kFps;
}

}  // namespace

class PlayerTest : public QObject {
  Q_OBJECT

 private slots:
  void play_pause_and_seek_keep_sound_and_picture_within_a_frame() {
    FramePlayer player;
    auto owned = std::make_unique<VirtualAudioOutput>();
    VirtualAudioOutput* device = owned.get();
    player.setAudioOutput(std::move(owned));
    player.setFrames(frames(48), kFps, sound(2.0));
    QVERIFY(player.hasSound());

    player.play();
    QVERIFY(device->playing());
    QCOMPARE(device->from(), 0);
    QVERIFY(player.isSoundPlaying());
    // The device's clock drives the frame, whatever the wall clock says: a slow device holds
    // the picture back.
    QTest::qWait(200);
    QCOMPARE(player.currentFrame(), 0);
    for (const std::int64_t heard :
         {sampleOf(12), sampleOf(13) - 1, sampleOf(13), sampleOf(30) + 7}) {
      device->hear(heard);
      QTRY_COMPARE(player.currentFrame(), static_cast<int>(std::floor(heard * kFps / kRate)));
      QVERIFY(inSync(player, heard));
    }

    // Pause: the sound stops with the picture; the device's clock moving (late buffers) does
    // not move the picture.
    player.pause();
    QVERIFY(!device->playing());
    const int pausedAt = player.currentFrame();
    device->hear(sampleOf(40));
    QTest::qWait(100);
    QCOMPARE(player.currentFrame(), pausedAt);
    // Play again: the sound resumes at the first sample of the frame shown.
    player.play();
    QVERIFY(device->playing());
    QCOMPARE(device->from(), sampleOf(pausedAt));
    QVERIFY(inSync(player, device->position()));

    // Seek while playing: the sound follows the picture.
    player.seek(6);
    QVERIFY(device->playing());
    QCOMPARE(device->from(), sampleOf(6));
    device->hear(sampleOf(9) + 100);
    QTRY_COMPARE(player.currentFrame(), 9);
    QVERIFY(inSync(player, device->position()));
    // A frame that begins between two samples (7 · 32000 / 24 = 9333.3): the sound starts
    // inside it, so the picture does not step back a frame.
    player.seek(7);
    QCOMPARE(device->from(), 9334);
    QTest::qWait(60);
    QCOMPARE(player.currentFrame(), 7);
    // Seek while paused, then play: the sound starts at the new frame.
    player.pause();
    player.seek(20);
    QVERIFY(!device->playing());
    player.play();
    QCOMPARE(device->from(), sampleOf(20));

    // The sound played to its end (2 s = 48 frames): the clip stops on its last frame.
    device->hear(sound(2.0)->frames());
    QTRY_VERIFY(!player.isPlaying());
    QCOMPARE(player.currentFrame(), 47);
    QVERIFY(!device->playing());
  }

  void loop_starts_the_sound_again_with_the_picture() {
    FramePlayer player;
    auto owned = std::make_unique<VirtualAudioOutput>();
    VirtualAudioOutput* device = owned.get();
    player.setAudioOutput(std::move(owned));
    player.setFrames(frames(24), kFps, sound(1.0));
    player.setLoop(true);
    player.play();
    QCOMPARE(device->starts(), 1);
    device->hear(sampleOf(23) + 10);  // in the last frame: it shows
    QTRY_COMPARE(player.currentFrame(), 23);
    device->hear(sampleOf(24));  // its end: both again from the start
    QTRY_COMPARE(device->starts(), 2);
    QCOMPARE(device->from(), 0);
    QVERIFY(player.isPlaying());
    QCOMPARE(player.currentFrame(), 0);
    device->hear(sampleOf(5));
    QTRY_COMPARE(player.currentFrame(), 5);
    player.pause();
  }

  void a_shorter_soundtrack_ends_and_the_picture_plays_on() {
    FramePlayer player;
    auto owned = std::make_unique<VirtualAudioOutput>();
    VirtualAudioOutput* device = owned.get();
    player.setAudioOutput(std::move(owned));
    player.setFrames(frames(12), kFps, sound(0.25));  // 6 frames of sound, 12 of picture
    player.play();
    device->hear(sound(0.25)->frames());
    QTRY_VERIFY(!player.isSoundPlaying());
    QVERIFY(player.currentFrame() >= 5);
    QTRY_COMPARE(player.currentFrame(), 11);  // the wall clock carries it to the end
    QTRY_VERIFY(!player.isPlaying());
    // Played from a frame past the sound's end: silence, and no device start.
    const int starts = device->starts();
    player.seek(8);
    player.play();
    QCOMPARE(device->starts(), starts);
    QVERIFY(!player.isSoundPlaying());
    QVERIFY(player.isPlaying());
    player.pause();
  }

  // A device that takes the sound but whose clock stops (a suspended output): after a second
  // without progress the picture goes on by the wall clock, silently, to the end.
  void a_stalled_device_does_not_freeze_the_picture() {
    FramePlayer player;
    auto owned = std::make_unique<VirtualAudioOutput>();
    VirtualAudioOutput* device = owned.get();
    player.setAudioOutput(std::move(owned));
    player.setFrames(frames(36), kFps, sound(1.5));
    player.play();
    device->hear(sampleOf(3));
    QTRY_COMPARE(player.currentFrame(), 3);
    QTest::qWait(300);  // stalled, but not for long yet: the picture waits for the sound
    QVERIFY(player.isSoundPlaying());
    QCOMPARE(player.currentFrame(), 3);
    QTRY_VERIFY_WITH_TIMEOUT(!player.isSoundPlaying(), 3000);
    QVERIFY(!device->playing());
    QTRY_VERIFY_WITH_TIMEOUT(!player.isPlaying(), 5000);
    QCOMPARE(player.currentFrame(), 35);
  }

  void mute_and_volume_reach_the_device() {
    FramePlayer player;
    auto owned = std::make_unique<VirtualAudioOutput>();
    VirtualAudioOutput* device = owned.get();
    player.setAudioOutput(std::move(owned));
    QCOMPARE(device->volume(), 1.0);  // full volume unless set
    player.setFrames(frames(48), kFps, sound(2.0));
    auto* mute = player.findChild<QToolButton*>(QStringLiteral("muteButton"));
    auto* volume = player.findChild<QSlider*>(QStringLiteral("volumeSlider"));
    QVERIFY(mute && volume);
    volume->setValue(40);
    QCOMPARE(device->volume(), 0.4);
    mute->click();
    QVERIFY(player.isMuted());
    QCOMPARE(device->volume(), 0.0);
    QCOMPARE(mute->accessibleName(), QStringLiteral("Unmute"));
    // Muted, the sound's clock still drives the picture.
    player.play();
    QVERIFY(device->playing());
    device->hear(sampleOf(10));
    QTRY_COMPARE(player.currentFrame(), 10);
    mute->click();
    QVERIFY(!player.isMuted());
    QCOMPARE(device->volume(), 0.4);
    player.setMuted(true);
    QVERIFY(mute->isChecked());
    QCOMPARE(device->volume(), 0.0);
    player.pause();
  }

  void the_sound_controls_show_only_for_a_clip_with_sound() {
    FramePlayer player;
    auto owned = std::make_unique<VirtualAudioOutput>();
    VirtualAudioOutput* device = owned.get();
    player.setAudioOutput(std::move(owned));
    player.show();
    auto* badge = player.findChild<QLabel*>(QStringLiteral("soundBadge"));
    auto* mute = player.findChild<QToolButton*>(QStringLiteral("muteButton"));
    QVERIFY(badge && mute);
    player.setFrames(frames(4), kFps, sound(1.0));
    QVERIFY(badge->isVisible());
    QVERIFY(mute->isVisible());
    QVERIFY(badge->toolTip().contains(QStringLiteral("32000 Hz")));
    // A silent clip: no badge, no sound controls, and it plays as before, by the wall clock.
    player.setFrames(frames(6), 30);
    QVERIFY(!player.hasSound());
    QVERIFY(!badge->isVisible());
    QVERIFY(!mute->isVisible());
    player.play();
    QVERIFY(!player.isSoundPlaying());
    QTRY_COMPARE(player.currentFrame(), 5);
    QTRY_VERIFY(!player.isPlaying());
    QCOMPARE(device->starts(), 0);
    // An empty soundtrack is no soundtrack.
    player.setFrames(frames(4), kFps, std::make_shared<media::AudioTrack>());
    QVERIFY(!player.hasSound());
    QVERIFY(!badge->isVisible());
  }

  // The system's own output (QAudioSink), whatever this machine has: a sound card, none (start()
  // declines and the wall clock plays), or one that never moves (given up on after a second).
  // The clip plays to its end either way.
  void a_clip_with_sound_plays_to_its_end_on_the_system_output() {
    FramePlayer player;
    player.setFrames(frames(6), kFps, sound(0.25));
    player.play();
    QVERIFY(player.isPlaying());
    const bool deviceTookIt = player.isSoundPlaying();
    QElapsedTimer took;
    took.start();
    QTRY_VERIFY_WITH_TIMEOUT(!player.isPlaying(), 10000);
    QCOMPARE(player.currentFrame(), 5);
    QVERIFY(player.audioOutput() != nullptr);  // made on the first play with sound
    // Played by a device, the clip lasts at least as long as its sound (the picture follows what
    // is heard, and does not jump ahead when the sink has merely read the buffer).
    if (deviceTookIt) QVERIFY2(took.elapsed() >= 240, qPrintable(QString::number(took.elapsed())));
    qInfo("system output: %s, the clip took %lld ms",
          deviceTookIt ? "played the sound" : "declined (no device)",
          static_cast<long long>(took.elapsed()));
  }

  // What the system device is given: the track from a frame on, in the device's rate, channel
  // count and sample format.
  void pcm_for_the_device_converts_rate_channels_and_format() {
    media::AudioTrack track;
    track.sample_rate = 32000;
    track.channels = 2;
    track.samples = {0.0f, 1.0f, 0.5f, -0.5f, 1.0f, 2.0f, -1.0f, 0.25f};  // 4 frames
    // Same rate, 16-bit, from frame 1: clamped and rounded to 32767 steps.
    const QByteArray s16 = ferry::gui::pcmForDevice(track, 1, 32000, 2, false);
    QCOMPARE(s16.size(), 3 * 2 * 2);
    std::int16_t v[6];
    std::memcpy(v, s16.constData(), sizeof v);
    const std::int16_t expected[6] = {16384, -16384, 32767, 32767, -32767, 8192};
    for (int i = 0; i < 6; ++i) QCOMPARE(v[i], expected[i]);
    // Twice the rate, mono track onto 2 float channels: interpolated halfway, each channel the
    // track's channel c % 1.
    media::AudioTrack mono{32000, 1, {0.0f, 0.5f}};
    const QByteArray f32 = ferry::gui::pcmForDevice(mono, 0, 64000, 2, true);
    QCOMPARE(f32.size(), 4 * 2 * 4);
    float f[8];
    std::memcpy(f, f32.constData(), sizeof f);
    const float fexpected[8] = {0.0f, 0.0f, 0.25f, 0.25f, 0.5f, 0.5f, 0.5f, 0.5f};
    for (int i = 0; i < 8; ++i) QCOMPARE(f[i], fexpected[i]);
    QVERIFY(ferry::gui::pcmForDevice(track, 4, 32000, 2, false).isEmpty());  // past the end
  }
};

QTEST_MAIN(PlayerTest)
#include "player_test.moc"
