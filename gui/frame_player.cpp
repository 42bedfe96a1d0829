#include "gui/frame_player.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QSlider>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>

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
      position_(new QLabel(this)) {
  play_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  play_->setToolTip(tr("Play / pause (Space while the player has focus)"));
  play_->setAccessibleName(tr("Play"));
  slider_->setAccessibleName(tr("Frame"));
  slider_->setToolTip(tr("Scrub through the frames (arrow keys step one frame)"));
  position_->setMinimumWidth(
      position_->fontMetrics().horizontalAdvance(QStringLiteral("000 / 000")));
  position_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);

  auto* controls = new QHBoxLayout;
  controls->addWidget(play_);
  controls->addWidget(slider_, 1);
  controls->addWidget(position_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view_, 1);
  layout->addLayout(controls);

  timer_.setTimerType(Qt::PreciseTimer);
  connect(&timer_, &QTimer::timeout, this, [this] {
    if (frames_.isEmpty()) return;
    ++current_;
    if (current_ >= static_cast<int>(frames_.size()) - 1) {
      // Stops on the last frame: an idle window uses no CPU.
      current_ = static_cast<int>(frames_.size()) - 1;
      timer_.stop();
      updateControls();
    }
    showFrame();
  });
  connect(play_, &QToolButton::clicked, this, &FramePlayer::togglePlay);
  connect(slider_, &QSlider::valueChanged, this, [this](int value) {
    if (value != current_) seek(value);
  });
  clear(tr("The video appears here."));
}

void FramePlayer::setFrames(const QVector<QImage>& frames, double fps) {
  timer_.stop();
  frames_ = frames;
  fps_ = fps > 0 ? fps : 16;
  current_ = 0;
  timer_.setInterval(static_cast<int>(std::lround(1000.0 / fps_)));
  updateControls();
  showFrame();
}

void FramePlayer::showPreview(const QImage& image, const QString& caption) {
  timer_.stop();
  frames_.clear();
  current_ = 0;
  view_->setImage(image);
  view_->setAccessibleDescription(caption);
  position_->setText(caption);
  updateControls();
}

void FramePlayer::clear(const QString& placeholder) {
  timer_.stop();
  frames_.clear();
  current_ = 0;
  view_->setPlaceholder(placeholder);
  position_->clear();
  updateControls();
}

const QImage& FramePlayer::shownImage() const {
  return view_->image();
}

void FramePlayer::play() {
  if (frames_.size() < 2) return;
  if (current_ >= static_cast<int>(frames_.size()) - 1) seek(0);  // from the start again
  timer_.start();
  updateControls();
}

void FramePlayer::pause() {
  timer_.stop();
  updateControls();
}

void FramePlayer::togglePlay() {
  isPlaying() ? pause() : play();
}

void FramePlayer::seek(int frame) {
  if (frames_.isEmpty()) return;
  current_ = std::clamp(frame, 0, static_cast<int>(frames_.size()) - 1);
  showFrame();
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
}

}  // namespace ferry::gui
