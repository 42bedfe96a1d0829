// Plays the decoded frames of the finished video, and its soundtrack when it has one: play,
// pause, scrub with the slider or the arrow keys, loop, mute and volume. Also shows the latent
// preview while a job runs.
//
// Sync: while the sound plays, the frame shown is the one the audio device's clock is in
// (frame = floor(seconds · fps)); pause stops the sound, and play and seek start it again from
// the first sample of the frame shown, so picture and sound never drift apart by a frame. Where
// no sound plays (a silent clip, no device, past the end of a shorter soundtrack, a device whose
// clock stopped for a second) the wall clock keeps the time.
#pragma once

#include <QElapsedTimer>
#include <QImage>
#include <QTimer>
#include <QVector>
#include <QWidget>
#include <memory>

#include "core/media/audio.h"

class QLabel;
class QSlider;
class QToolButton;

namespace ferry::gui {

// The picture itself, scaled to fit with its aspect ratio kept (high-DPI aware).
class FrameView : public QWidget {
  Q_OBJECT

 public:
  explicit FrameView(QWidget* parent = nullptr);
  void setImage(const QImage& image);
  void setPlaceholder(const QString& text);
  const QImage& image() const { return image_; }
  QSize sizeHint() const override { return {480, 270}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QImage image_;
  QString placeholder_;
};

class AudioOutput;

class FramePlayer : public QWidget {
  Q_OBJECT

 public:
  explicit FramePlayer(QWidget* parent = nullptr);
  ~FramePlayer() override;

  // `sound`: the clip's soundtrack (null or empty for a silent clip).
  void setFrames(const QVector<QImage>& frames, double fps,
                 std::shared_ptr<const media::AudioTrack> sound = nullptr);
  // Where the sound goes (the system's output unless set; the tests give their own device).
  void setAudioOutput(std::unique_ptr<AudioOutput> output);
  AudioOutput* audioOutput() const { return audio_.get(); }
  // A single picture (the latent preview) with a caption; stops playback.
  void showPreview(const QImage& image, const QString& caption);
  void clear(const QString& placeholder);

  int frameCount() const { return static_cast<int>(frames_.size()); }
  int currentFrame() const { return current_; }
  bool isPlaying() const { return timer_.isActive(); }
  const QImage& shownImage() const;
  bool hasSound() const { return sound_ && !sound_->empty(); }
  // The clip's soundtrack as it plays (null for a silent clip).
  const std::shared_ptr<const media::AudioTrack>& sound() const { return sound_; }
  bool isSoundPlaying() const { return soundPlaying_; }
  bool isMuted() const { return muted_; }
  int volume() const;  // 0-100
  bool loops() const;

 signals:
  // "Save soundtrack…" was clicked (shown with the sound controls): the window asks where.
  void saveSoundtrackRequested();

 public slots:
  void play();
  void pause();
  void togglePlay();
  void seek(int frame);
  void setMuted(bool muted);
  void setVolume(int percent);
  void setLoop(bool loop);

 protected:
  // Space plays or pauses, the arrow keys step a frame, Home and End jump (with the focus on the
  // picture).
  void keyPressEvent(QKeyEvent* event) override;

 private:
  void showFrame();
  void updateControls();
  void advance();  // the timer's tick: the frame the clock is in
  // Starts the clock (and the sound, when there is one) at the frame shown; stops both.
  void startClock();
  void stopSound();
  double clockSeconds();
  void applyVolume();

  QVector<QImage> frames_;
  double fps_ = 16;
  int current_ = 0;
  QTimer timer_;
  std::shared_ptr<const media::AudioTrack> sound_;
  std::unique_ptr<AudioOutput> audio_;
  bool soundPlaying_ = false;  // the device's clock drives the frames
  bool muted_ = false;
  // A device whose clock has not moved for this long is given up on (the wall clock goes on).
  static constexpr qint64 kSoundStallMs = 1000;
  std::int64_t lastHeard_ = 0;
  QElapsedTimer stalled_;  // since the device's clock last moved
  QElapsedTimer wall_;     // the clock where no sound plays...
  double wallStart_ = 0;   // ...from this time in the clip
  FrameView* view_;
  QToolButton* play_;
  QSlider* slider_;
  QLabel* position_;
  QToolButton* loop_;
  QLabel* soundBadge_;  // shown when the clip has sound
  QToolButton* mute_;
  QSlider* volume_;
  QToolButton* saveSound_;
};

}  // namespace ferry::gui
