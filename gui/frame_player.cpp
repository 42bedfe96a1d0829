#include "gui/frame_player.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QSlider>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "gui/audio_output.h"

namespace ferry::gui {

FrameView::FrameView(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setMinimumSize(240, 135);
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName(tr("Video"));
}

void FrameView::setImage(const QImage& image) {
  image_ = image;
  update();
}

void FrameView::setPlaceholder(const QString& text) {
  placeholder_ = text;
  image_ = {};
  setAccessibleDescription(text);
  update();
}

void FrameView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Window).darker(image_.isNull() ? 105 : 180));
  if (image_.isNull()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect().adjusted(12, 12, -12, -12), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
    return;
  }
  const QSize scaled = image_.size().scaled(size(), Qt::KeepAspectRatio);
  const QRect target(QPoint((width() - scaled.width()) / 2, (height() - scaled.height()) / 2),
                     scaled);
  p.setRenderHint(QPainter::SmoothPixmapTransform, scaled.width() < image_.width());
  p.drawImage(target, image_);
}

FramePlayer::FramePlayer(QWidget* parent)
    : QWidget(parent),
      view_(new FrameView(this)),
      play_(new QToolButton(this)),
      slider_(new QSlider(Qt::Horizontal, this)),
      position_(new QLabel(this)),
      loop_(new QToolButton(this)),
      soundBadge_(new QLabel(this)),
      mute_(new QToolButton(this)),
      volume_(new QSlider(Qt::Horizontal, this)),
      saveSound_(new QToolButton(this)) {
  play_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  play_->setToolTip(tr("Play / pause (Space while the player has focus)"));
  play_->setAccessibleName(tr("Play"));
  slider_->setObjectName(QStringLiteral("frameSlider"));
  slider_->setAccessibleName(tr("Frame"));
  slider_->setToolTip(tr("Scrub through the frames (arrow keys step one frame)"));
  position_->setMinimumWidth(
      position_->fontMetrics().horizontalAdvance(QStringLiteral("000 / 000")));
  position_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  loop_->setText(tr("Loop"));
  loop_->setCheckable(true);
  loop_->setAccessibleName(tr("Loop"));
  loop_->setToolTip(tr("Play the clip again from the start when it ends"));
  // The sound controls: a badge that says the clip has a soundtrack, mute and volume.
  soundBadge_->setObjectName(QStringLiteral("soundBadge"));
  soundBadge_->setPixmap(style()->standardIcon(QStyle::SP_MediaVolume).pixmap(16, 16));
  soundBadge_->setAccessibleName(tr("This clip has sound"));
  mute_->setObjectName(QStringLiteral("muteButton"));
  mute_->setCheckable(true);
  mute_->setIcon(style()->standardIcon(QStyle::SP_MediaVolume));
  mute_->setAccessibleName(tr("Mute"));
  mute_->setToolTip(tr("Mute the sound"));
  volume_->setObjectName(QStringLiteral("volumeSlider"));
  volume_->setRange(0, 100);
  volume_->setValue(100);
  volume_->setMaximumWidth(90);
  volume_->setAccessibleName(tr("Volume"));
  volume_->setToolTip(tr("Volume"));
  saveSound_->setObjectName(QStringLiteral("saveSoundtrackButton"));
  saveSound_->setIcon(style()->standardIcon(QStyle::SP_DialogSaveButton));
  saveSound_->setAccessibleName(tr("Save soundtrack"));
  saveSound_->setToolTip(tr("Save the soundtrack as a WAV file (16-bit PCM)"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(play_);
  controls->addWidget(slider_, 1);
  controls->addWidget(position_);
  controls->addWidget(loop_);
  controls->addWidget(soundBadge_);
  controls->addWidget(mute_);
  controls->addWidget(volume_);
  controls->addWidget(saveSound_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view_, 1);
  layout->addLayout(controls);

  timer_.setTimerType(Qt::PreciseTimer);
  connect(&timer_, &QTimer::timeout, this, &FramePlayer::advance);
  connect(play_, &QToolButton::clicked, this, &FramePlayer::togglePlay);
  connect(slider_, &QSlider::valueChanged, this, [this](int value) {
    if (value != current_) seek(value);
  });
  connect(mute_, &QToolButton::toggled, this, &FramePlayer::setMuted);
  connect(volume_, &QSlider::valueChanged, this, &FramePlayer::setVolume);
  connect(saveSound_, &QToolButton::clicked, this, &FramePlayer::saveSoundtrackRequested);
  clear(tr("The video appears here."));
}

FramePlayer::~FramePlayer() {
  stopSound();
}

void FramePlayer::setFrames(const QVector<QImage>& frames, double fps,
                            std::shared_ptr<const media::AudioTrack> sound) {
  pause();
  frames_ = frames;
  fps_ = fps > 0 ? fps : 16;
  sound_ = sound && !sound->empty() ? std::move(sound) : nullptr;
  current_ = 0;
  // Twice a frame: the frame shown trails the clock by at most half a frame.
  timer_.setInterval(std::max(4, static_cast<int>(std::lround(500.0 / fps_))));
  if (sound_) {
    soundBadge_->setToolTip(
        tr("This clip has sound (%1 Hz, %2)")
            .arg(sound_->sample_rate)
            .arg(sound_->channels == 2 ? tr("stereo") : tr("%n channel(s)", "", sound_->channels)));
  }
  updateControls();
  showFrame();
}

void FramePlayer::setAudioOutput(std::unique_ptr<AudioOutput> output) {
  const bool wasPlaying = isPlaying();
  pause();
  audio_ = std::move(output);
  applyVolume();
  if (wasPlaying) play();
}

void FramePlayer::showPreview(const QImage& image, const QString& caption) {
  pause();
  frames_.clear();
  sound_.reset();
  current_ = 0;
  view_->setImage(image);
  view_->setAccessibleDescription(caption);
  position_->setText(caption);
  updateControls();
}

void FramePlayer::clear(const QString& placeholder) {
  pause();
  frames_.clear();
  sound_.reset();
  current_ = 0;
  view_->setPlaceholder(placeholder);
  position_->clear();
  updateControls();
}

const QImage& FramePlayer::shownImage() const {
  return view_->image();
}

int FramePlayer::volume() const {
  return volume_->value();
}

bool FramePlayer::loops() const {
  return loop_->isChecked();
}

void FramePlayer::play() {
  if (frames_.size() < 2) return;
  if (current_ >= static_cast<int>(frames_.size()) - 1) current_ = 0;  // from the start again
  showFrame();
  startClock();
  timer_.start();
  updateControls();
}

void FramePlayer::pause() {
  timer_.stop();
  stopSound();
  updateControls();
}

void FramePlayer::togglePlay() {
  isPlaying() ? pause() : play();
}

void FramePlayer::seek(int frame) {
  if (frames_.isEmpty()) return;
  current_ = std::clamp(frame, 0, static_cast<int>(frames_.size()) - 1);
  showFrame();
  if (isPlaying()) startClock();  // the sound follows the picture to its new place
}

void FramePlayer::setMuted(bool muted) {
  muted_ = muted;
  const QSignalBlocker block(mute_);
  mute_->setChecked(muted);
  mute_->setIcon(
      style()->standardIcon(muted ? QStyle::SP_MediaVolumeMuted : QStyle::SP_MediaVolume));
  mute_->setAccessibleName(muted ? tr("Unmute") : tr("Mute"));
  applyVolume();
}

void FramePlayer::setVolume(int percent) {
  const QSignalBlocker block(volume_);
  volume_->setValue(std::clamp(percent, 0, 100));
  applyVolume();
}

void FramePlayer::setLoop(bool loop) {
  loop_->setChecked(loop);
}

void FramePlayer::applyVolume() {
  // Muted, the sound still plays at zero gain: its clock keeps driving the frames.
  if (audio_) audio_->setVolume(muted_ ? 0.0 : volume_->value() / 100.0);
}

void FramePlayer::startClock() {
  stopSound();
  const double seconds = current_ / fps_;
  wallStart_ = seconds;
  wall_.start();
  if (!sound_) return;
  // The first sample inside the frame (rounding to the nearest could land in the frame before).
  const auto from = static_cast<std::int64_t>(std::ceil(seconds * sound_->sample_rate - 1e-6));
  if (from >= sound_->frames()) return;  // past a shorter soundtrack's end: silence
  if (!audio_) {
    audio_ = std::make_unique<SystemAudioOutput>();
    applyVolume();
  }
  soundPlaying_ = audio_->start(sound_, from);
  lastHeard_ = from;
  stalled_.start();
}

void FramePlayer::stopSound() {
  if (soundPlaying_ && audio_) audio_->stop();
  soundPlaying_ = false;
}

double FramePlayer::clockSeconds() {
  if (soundPlaying_) {
    const std::int64_t heard = audio_->position();
    if (heard != lastHeard_) {
      lastHeard_ = heard;
      stalled_.start();
    }
    const double heardSeconds = static_cast<double>(heard) / sound_->sample_rate;
    if (heard < sound_->frames() && stalled_.elapsed() < kSoundStallMs) return heardSeconds;
    // The soundtrack ended before the picture, or the device stopped taking it (a suspended or
    // unplugged output): the wall clock goes on from there, silently, so the picture never
    // freezes.
    stopSound();
    wallStart_ = std::min(heardSeconds, sound_->seconds());
    wall_.start();
  }
  return wallStart_ + static_cast<double>(wall_.nsecsElapsed()) / 1e9;
}

void FramePlayer::advance() {
  if (frames_.isEmpty()) return;
  const int last = static_cast<int>(frames_.size()) - 1;
  const int frame = static_cast<int>(std::floor(clockSeconds() * fps_ + 1e-9));
  if (frame >= last && loops()) {
    if (frame > last) {  // the last frame has had its time: again from the start
      current_ = 0;
      showFrame();
      startClock();
      return;
    }
  } else if (frame >= last) {
    // Stops on the last frame: an idle window uses no CPU.
    current_ = last;
    showFrame();
    pause();
    return;
  }
  if (frame != current_) {
    current_ = std::clamp(frame, 0, last);
    showFrame();
  }
}

void FramePlayer::keyPressEvent(QKeyEvent* event) {
  switch (event->key()) {
    case Qt::Key_Space:
      togglePlay();
      break;
    case Qt::Key_Left:
      pause();
      seek(current_ - 1);
      break;
    case Qt::Key_Right:
      pause();
      seek(current_ + 1);
      break;
    case Qt::Key_Home:
      seek(0);
      break;
    case Qt::Key_End:
      seek(frameCount() - 1);
      break;
    default:
      QWidget::keyPressEvent(event);
      return;
  }
  event->accept();
}

void FramePlayer::showFrame() {
  if (frames_.isEmpty()) return;
  view_->setImage(frames_[current_]);
  const QSignalBlocker block(slider_);
  slider_->setValue(current_);
  position_->setText(tr("%1 / %2").arg(current_ + 1).arg(frames_.size()));
}

void FramePlayer::updateControls() {
  const bool haveFrames = !frames_.isEmpty();
  play_->setEnabled(frames_.size() > 1);
  slider_->setEnabled(haveFrames);
  slider_->setRange(0, haveFrames ? static_cast<int>(frames_.size()) - 1 : 0);
  play_->setIcon(style()->standardIcon(isPlaying() ? QStyle::SP_MediaPause : QStyle::SP_MediaPlay));
  play_->setAccessibleName(isPlaying() ? tr("Pause") : tr("Play"));
  loop_->setEnabled(frames_.size() > 1);
  // The sound controls only for a clip with sound: a silent clip looks as it always did.
  soundBadge_->setVisible(hasSound());
  mute_->setVisible(hasSound());
  volume_->setVisible(hasSound());
  saveSound_->setVisible(hasSound());
}

}  // namespace ferry::gui
